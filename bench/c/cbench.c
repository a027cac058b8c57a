/*
 * Queue throughput with the stock OpenMQ C client (libmqcrt), run by bench/c_client.py.
 *
 *   cbench HOST PORT produce QUEUE COUNT SIZE   send COUNT non-persistent bytes messages
 *   cbench HOST PORT consume QUEUE COUNT        receive COUNT messages (AUTO_ACKNOWLEDGE)
 *
 * Prints "<mode> COUNT messages in SECONDS s" (time from the first message to the last).
 */
#define _POSIX_C_SOURCE 200809L
#include <mqcrt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void die(const char *what, MQStatus st)
{
    MQString s = MQGetStatusString(st);
    fprintf(stderr, "%s: code=%u %s\n", what, (unsigned)MQGetStatusCode(st), s ? s : "");
    exit(1);
}

#define CALL(expr)                                                                       \
    do {                                                                                 \
        MQStatus st_ = (expr);                                                           \
        if (MQStatusIsError(st_)) die(#expr, st_);                                       \
    } while (0)

int main(int argc, char **argv)
{
    MQPropertiesHandle props = MQ_INVALID_HANDLE;
    MQConnectionHandle c = MQ_INVALID_HANDLE;
    MQSessionHandle s = MQ_INVALID_HANDLE;
    MQDestinationHandle d = MQ_INVALID_HANDLE;
    if (argc < 6) {
        fprintf(stderr, "usage: %s HOST PORT produce QUEUE COUNT SIZE | consume QUEUE COUNT\n", argv[0]);
        return 2;
    }
    const char *mode = argv[3];
    long count = atol(argv[5]);
    CALL(MQCreateProperties(&props));
    CALL(MQSetStringProperty(props, MQ_BROKER_HOST_PROPERTY, argv[1]));
    CALL(MQSetInt32Property(props, MQ_BROKER_PORT_PROPERTY, atoi(argv[2])));
    CALL(MQSetStringProperty(props, MQ_CONNECTION_TYPE_PROPERTY, "TCP"));
    CALL(MQCreateConnection(props, "guest", "guest", NULL, NULL, NULL, &c));
    CALL(MQCreateSession(c, MQ_FALSE, MQ_AUTO_ACKNOWLEDGE, MQ_SESSION_SYNC_RECEIVE, &s));
    CALL(MQCreateDestination(s, argv[4], MQ_QUEUE_DESTINATION, &d));
    double t0 = 0, t1 = 0;
    if (strcmp(mode, "produce") == 0 && argc > 6) {
        MQProducerHandle p = MQ_INVALID_HANDLE;
        MQMessageHandle m = MQ_INVALID_HANDLE;
        int size = atoi(argv[6]);
        MQInt8 *body = calloc(size, 1);
        CALL(MQCreateMessageProducerForDestination(s, d, &p));
        CALL(MQCreateBytesMessage(&m));
        CALL(MQSetBytesMessageBytes(m, body, size));
        t0 = now();
        for (long i = 0; i < count; i++)
            CALL(MQSendMessageExt(p, m, MQ_NON_PERSISTENT_DELIVERY, 4, 0));
        t1 = now();
        MQFreeMessage(m);
        free(body);
    } else if (strcmp(mode, "consume") == 0) {
        MQConsumerHandle k = MQ_INVALID_HANDLE;
        CALL(MQCreateMessageConsumer(s, d, NULL, MQ_FALSE, &k));
        CALL(MQStartConnection(c));
        for (long i = 0; i < count; i++) {
            MQMessageHandle m = MQ_INVALID_HANDLE;
            CALL(MQReceiveMessageWithTimeout(k, 60000, &m));
            if (i == 0) t0 = now();
            MQFreeMessage(m);
        }
        t1 = now();
    } else {
        fprintf(stderr, "unknown mode %s\n", mode);
        return 2;
    }
    printf("%s %ld messages in %.3f s\n", mode, count, t1 - t0);
    MQFreeDestination(d);
    MQCloseConnection(c);
    MQFreeConnection(c);
    return 0;
}
