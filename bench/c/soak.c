/*
 * Crash-soak client for bench/crash_soak.py: the stock OpenMQ C client (libmqcrt) producing
 * and consuming PERSISTENT messages while the broker is SIGKILLed under it.
 *
 *   soak HOST PORT produce QUEUE ID COUNT
 *        send COUNT text messages "ID.N" (N from 0), one at a time; after each send that
 *        returned MQ_OK (the broker's SEND_REPLY said stored) print "TS S ID.N"
 *   soak HOST PORT tproduce QUEUE ID TXNS SIZE
 *        a transacted session: TXNS transactions of SIZE messages "ID.tT.I"; prints
 *        "TS B T" before the first send, "TS K T" just before MQCommitSession,
 *        "TS C T" once it returned OK; about one in eight is rolled back on purpose
 *        ("TS R T" once MQRollbackSession returned OK)
 *   soak HOST PORT consume QUEUE MODE N IDLE_MS
 *        MODE auto | client | txn | listen.  Prints "TS r SEQ REDELIVERED" per message received.
 *        auto: the receive returning is the acknowledgement (the library acknowledges
 *        inside it and waits for the reply).  client: every N messages "TS A? " then
 *        MQAcknowledgeMessages, "TS A" once it returned OK; now and then MQRecoverSession
 *        instead ("TS V" once it returned).  txn: every N messages "TS K", MQCommitSession,
 *        "TS C" once OK; now and then MQRollbackSession instead ("TS R").
 *        listen: AUTO_ACKNOWLEDGE with a message listener (MQCreateAsyncMessageConsumer),
 *        which prints each message before the library acknowledges it (once the listener
 *        returned; the next one comes only after that).
 *        Exits 0 after IDLE_MS without a message (0: never).
 *
 * SOAK_PAD=N in the environment pads each body with a space and N bytes (bigger messages:
 * the file store rolls and reclaims segments more often); consumers print the first word.
 *
 * TS is CLOCK_MONOTONIC in microseconds (one clock for every process on the host).  Any
 * failed call prints "TS E what code text" and exits 3 at once (no close: the broker is
 * usually gone).  Every line is flushed as it is printed, so a SIGKILLed client's output
 * is complete up to its last finished call.
 */
#define _POSIX_C_SOURCE 200809L
#include <mqcrt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static long long ts(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)t.tv_sec * 1000000LL + t.tv_nsec / 1000;
}

static void die(const char *what, MQStatus st)
{
    MQString s = MQGetStatusString(st);
    printf("%lld E %s %u %s\n", ts(), what, (unsigned)MQGetStatusCode(st), s ? s : "");
    fflush(stdout);
    _exit(3);
}

#define CALL(expr)                                                                       \
    do {                                                                                 \
        MQStatus st_ = (expr);                                                           \
        if (MQStatusIsError(st_)) die(#expr, st_);                                       \
    } while (0)

static MQBool redelivered(MQMessageHandle m)
{
    MQPropertiesHandle h = MQ_INVALID_HANDLE;
    MQBool v = MQ_FALSE;
    CALL(MQGetMessageHeaders(m, &h));
    CALL(MQGetBoolProperty(h, MQ_REDELIVERED_HEADER_PROPERTY, &v));
    MQFreeProperties(h);
    return v;
}

static char *padded;  /* SOAK_PAD=N: each body is the sequence number, a space, N bytes */
static size_t pad;

static volatile long long last_message;  /* listen mode: when the listener last ran */

/* listen mode: print the message before the library acknowledges it (it does so once the
 * listener returns, and delivers the next one only after that acknowledgement). */
static MQError on_message(const MQSessionHandle s, const MQConsumerHandle k, MQMessageHandle m,
                          void *data)
{
    ConstMQString body = NULL;
    (void)s, (void)k, (void)data;
    if (MQStatusIsError(MQGetTextMessageText(m, &body)) || !body) body = "";
    printf("%lld r %.*s %d\n", ts(), (int)strcspn(body, " "), body, redelivered(m) ? 1 : 0);
    last_message = ts();
    MQFreeMessage(m);
    return MQ_OK;
}

/* The connection is gone (listen mode learns it only here): stop at once. */
static void on_exception(const MQConnectionHandle c, MQStatus st, void *data)
{
    (void)c, (void)data;
    die("connection exception", st);
}

static void send_text(MQProducerHandle p, const char *text)
{
    MQMessageHandle m = MQ_INVALID_HANDLE;
    CALL(MQCreateTextMessage(&m));
    if (pad) {
        size_t n = strlen(text);
        memcpy(padded, text, n);
        padded[n] = ' ';
        memset(padded + n + 1, 'x', pad);
        padded[n + 1 + pad] = 0;
        CALL(MQSetTextMessageText(m, padded));
    } else {
        CALL(MQSetTextMessageText(m, text));
    }
    CALL(MQSendMessageExt(p, m, MQ_PERSISTENT_DELIVERY, 4, 0));
    MQFreeMessage(m);
}

int main(int argc, char **argv)
{
    if (argc < 7) {
        fprintf(stderr, "usage: see bench/c/soak.c\n");
        return 2;
    }
    /* Line buffered even into a file: a killed client's lines are all there. */
    setvbuf(stdout, NULL, _IOLBF, 0);
    srand((unsigned)getpid() ^ (unsigned)ts());
    if (getenv("SOAK_PAD")) {
        pad = (size_t)atol(getenv("SOAK_PAD"));
        padded = malloc(pad + 300);
    }
    const char *mode = argv[3];
    MQPropertiesHandle props = MQ_INVALID_HANDLE;
    MQConnectionHandle c = MQ_INVALID_HANDLE;
    MQSessionHandle s = MQ_INVALID_HANDLE;
    MQDestinationHandle d = MQ_INVALID_HANDLE;
    CALL(MQCreateProperties(&props));
    CALL(MQSetStringProperty(props, MQ_BROKER_HOST_PROPERTY, argv[1]));
    CALL(MQSetInt32Property(props, MQ_BROKER_PORT_PROPERTY, atoi(argv[2])));
    CALL(MQSetStringProperty(props, MQ_CONNECTION_TYPE_PROPERTY, "TCP"));
    /* Replies are waited for: a returned MQ_OK means the broker answered. */
    CALL(MQSetBoolProperty(props, MQ_ACK_ON_PRODUCE_PROPERTY, MQ_TRUE));
    CALL(MQSetBoolProperty(props, MQ_ACK_ON_ACKNOWLEDGE_PROPERTY, MQ_TRUE));
    CALL(MQSetInt32Property(props, MQ_ACK_TIMEOUT_PROPERTY, 60000));
    CALL(MQCreateConnection(props, "guest", "guest", NULL, on_exception, NULL, &c));
    int transacted = strcmp(mode, "tproduce") == 0 ||
                     (strcmp(mode, "consume") == 0 && strcmp(argv[5], "txn") == 0);
    MQAckMode ack = MQ_AUTO_ACKNOWLEDGE;
    if (strcmp(mode, "consume") == 0 && strcmp(argv[5], "client") == 0)
        ack = MQ_CLIENT_ACKNOWLEDGE;
    int listen = strcmp(mode, "consume") == 0 && strcmp(argv[5], "listen") == 0;
    CALL(MQCreateSession(c, transacted ? MQ_TRUE : MQ_FALSE, ack,
                         listen ? MQ_SESSION_ASYNC_RECEIVE : MQ_SESSION_SYNC_RECEIVE, &s));
    CALL(MQCreateDestination(s, argv[4], MQ_QUEUE_DESTINATION, &d));
    char text[256];
    if (strcmp(mode, "produce") == 0) {
        MQProducerHandle p = MQ_INVALID_HANDLE;
        const char *id = argv[5];
        long count = atol(argv[6]);
        CALL(MQCreateMessageProducerForDestination(s, d, &p));
        for (long n = 0; n < count; n++) {
            snprintf(text, sizeof text, "%s.%ld", id, n);
            send_text(p, text);
            printf("%lld S %s\n", ts(), text);
        }
    } else if (strcmp(mode, "tproduce") == 0 && argc > 7) {
        MQProducerHandle p = MQ_INVALID_HANDLE;
        const char *id = argv[5];
        long txns = atol(argv[6]);
        int size = atoi(argv[7]);
        CALL(MQCreateMessageProducerForDestination(s, d, &p));
        for (long t = 0; t < txns; t++) {
            printf("%lld B %ld\n", ts(), t);
            for (int i = 0; i < size; i++) {
                snprintf(text, sizeof text, "%s.t%ld.%d", id, t, i);
                send_text(p, text);
            }
            if (rand() % 8 == 0) {
                CALL(MQRollbackSession(s));
                printf("%lld R %ld\n", ts(), t);
            } else {
                printf("%lld K %ld\n", ts(), t);
                CALL(MQCommitSession(s));
                printf("%lld C %ld\n", ts(), t);
            }
        }
    } else if (listen && argc > 7) {
        int idle = atoi(argv[7]);
        MQConsumerHandle k = MQ_INVALID_HANDLE;
        CALL(MQCreateAsyncMessageConsumer(s, d, NULL, MQ_FALSE, on_message, NULL, &k));
        last_message = ts();
        CALL(MQStartConnection(c));
        for (;;) {
            struct timespec t = {0, 50 * 1000000L};
            nanosleep(&t, NULL);
            if (idle > 0 && ts() - last_message > idle * 1000LL) break;
        }
        CALL(MQStopConnection(c));
    } else if (strcmp(mode, "consume") == 0 && argc > 7) {
        const char *how = argv[5];
        int every = atoi(argv[6]);
        int idle = atoi(argv[7]);
        int client = strcmp(how, "client") == 0, txn = strcmp(how, "txn") == 0;
        MQConsumerHandle k = MQ_INVALID_HANDLE;
        CALL(MQCreateMessageConsumer(s, d, NULL, MQ_FALSE, &k));
        CALL(MQStartConnection(c));
        int held = 0;
        MQMessageHandle last = MQ_INVALID_HANDLE;
        int have_last = 0;
        for (;;) {
            MQMessageHandle m = MQ_INVALID_HANDLE;
            MQStatus st = MQReceiveMessageWithTimeout(k, idle > 0 ? idle : 1000, &m);
            if (MQGetStatusCode(st) == MQ_TIMEOUT_EXPIRED) {
                if (idle > 0) break;
                continue;
            }
            if (MQStatusIsError(st)) die("MQReceiveMessageWithTimeout", st);
            ConstMQString body = NULL;
            CALL(MQGetTextMessageText(m, &body));
            if (!body) body = "";
            printf("%lld r %.*s %d\n", ts(), (int)strcspn(body, " "), body, redelivered(m) ? 1 : 0);
            held++;
            if (client && held >= every) {
                if (rand() % 16 == 0) {
                    CALL(MQRecoverSession(s));
                    printf("%lld V\n", ts());
                } else {
                    printf("%lld A?\n", ts());
                    CALL(MQAcknowledgeMessages(s, m));
                    printf("%lld A\n", ts());
                }
                held = 0;
            } else if (txn && held >= every) {
                if (rand() % 16 == 0) {
                    CALL(MQRollbackSession(s));
                    printf("%lld R\n", ts());
                } else {
                    printf("%lld K\n", ts());
                    CALL(MQCommitSession(s));
                    printf("%lld C\n", ts());
                }
                held = 0;
            }
            /* The last one stays: an idle client session acknowledges through it. */
            if (have_last) MQFreeMessage(last);
            last = m;
            have_last = 1;
        }
        /* Idle: whatever is held is acknowledged / committed before leaving. */
        if (held && client) {
            printf("%lld A?\n", ts());
            CALL(MQAcknowledgeMessages(s, last));
            printf("%lld A\n", ts());
        } else if (held && txn) {
            printf("%lld K\n", ts());
            CALL(MQCommitSession(s));
            printf("%lld C\n", ts());
        }
    } else {
        fprintf(stderr, "unknown mode %s\n", mode);
        return 2;
    }
    printf("%lld done\n", ts());
    MQCloseConnection(c);
    MQFreeConnection(c);
    return 0;
}
