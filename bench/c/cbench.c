/*
 * Queue throughput with the stock OpenMQ C client (libmqcrt), run by bench/c_client.py.
 *
 *   cbench HOST PORT produce QUEUE COUNT SIZE [persistent]
 *                                               send COUNT bytes messages (non-persistent
 *                                               unless told)
 *   cbench HOST PORT consume QUEUE COUNT        receive COUNT messages (AUTO_ACKNOWLEDGE)
 *   cbench HOST PORT pace QUEUE COUNT SIZE RATE send at a steady RATE msgs/s, each body
 *                                               starting with CLOCK_MONOTONIC ns
 *   cbench HOST PORT latency QUEUE COUNT        receive (AUTO_ACKNOWLEDGE) and print the
 *                                               latency distribution of those stamps
 *
 * CBENCH_TOPIC=1 in the environment makes QUEUE a topic; CBENCH_ACK=dups_ok makes the
 * session DUPS_OK_ACKNOWLEDGE.
 * Prints "<mode> COUNT messages in SECONDS s" (time from the first message to the last);
 * latency adds "latency_ms p50 P p99 P p999 P max M" (sender and receiver on one host
 * share CLOCK_MONOTONIC).
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

static long long now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static int cmp_ll(const void *a, const void *b)
{
    long long x = *(const long long *)a, y = *(const long long *)b;
    return x < y ? -1 : x > y;
}

static double pct_ms(const long long *sorted, long n, double p)
{
    long k = (long)(p / 100.0 * (n - 1) + 0.5);
    if (k >= n) k = n - 1;
    return sorted[k] / 1e6;
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
    /* CBENCH_ACK=dups_ok: DUPS_OK_ACKNOWLEDGE (acknowledgements batched, no reply waited
     * for) instead of AUTO_ACKNOWLEDGE. */
    const char *ack = getenv("CBENCH_ACK");
    MQAckMode ack_mode = ack != NULL && strcmp(ack, "dups_ok") == 0 ? MQ_DUPS_OK_ACKNOWLEDGE
                                                                    : MQ_AUTO_ACKNOWLEDGE;
    CALL(MQCreateSession(c, MQ_FALSE, ack_mode, MQ_SESSION_SYNC_RECEIVE, &s));
    /* CBENCH_TOPIC=1: the destination is a topic (consumers must subscribe first). */
    const char *as_topic = getenv("CBENCH_TOPIC");
    int topic = as_topic != NULL && strcmp(as_topic, "1") == 0;
    CALL(MQCreateDestination(s, argv[4], topic ? MQ_TOPIC_DESTINATION : MQ_QUEUE_DESTINATION, &d));
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
        /* A 7th argument "persistent": persistent sends (the client waits for each
         * SEND_REPLY, as the stock client does for persistent messages). */
        MQDeliveryMode mode_ = argc > 7 && strcmp(argv[7], "persistent") == 0
                                   ? MQ_PERSISTENT_DELIVERY
                                   : MQ_NON_PERSISTENT_DELIVERY;
        for (long i = 0; i < count; i++)
            CALL(MQSendMessageExt(p, m, mode_, 4, 0));
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
    } else if (strcmp(mode, "pace") == 0 && argc > 7) {
        MQProducerHandle p = MQ_INVALID_HANDLE;
        int size = atoi(argv[6]);
        double rate = atof(argv[7]);
        long long step = (long long)(1e9 / rate);
        MQInt8 *body = calloc(size < 8 ? 8 : size, 1);
        CALL(MQCreateMessageProducerForDestination(s, d, &p));
        t0 = now();
        long long next = now_ns();
        for (long i = 0; i < count; i++) {
            next += step;
            long long wait = next - now_ns();
            if (wait > 0) {
                struct timespec ts = {wait / 1000000000LL, wait % 1000000000LL};
                nanosleep(&ts, NULL);
            }
            MQMessageHandle m = MQ_INVALID_HANDLE;
            long long stamp = now_ns();
            memcpy(body, &stamp, 8);
            CALL(MQCreateBytesMessage(&m));
            CALL(MQSetBytesMessageBytes(m, body, size < 8 ? 8 : size));
            CALL(MQSendMessageExt(p, m, MQ_NON_PERSISTENT_DELIVERY, 4, 0));
            MQFreeMessage(m);
        }
        t1 = now();
        free(body);
    } else if (strcmp(mode, "latency") == 0) {
        MQConsumerHandle k = MQ_INVALID_HANDLE;
        long long *lat = malloc(sizeof(long long) * (count > 0 ? count : 1));
        long long *at = malloc(sizeof(long long) * (count > 0 ? count : 1));
        CALL(MQCreateMessageConsumer(s, d, NULL, MQ_FALSE, &k));
        CALL(MQStartConnection(c));
        for (long i = 0; i < count; i++) {
            MQMessageHandle m = MQ_INVALID_HANDLE;
            const MQInt8 *bytes = NULL;
            MQInt32 n = 0;
            long long stamp = 0;
            CALL(MQReceiveMessageWithTimeout(k, 60000, &m));
            long long got = now_ns();
            if (i == 0) t0 = now();
            CALL(MQGetBytesMessageBytes(m, &bytes, &n));
            if (n >= 8) memcpy(&stamp, bytes, 8);
            lat[i] = got - stamp;
            at[i] = got;
            MQFreeMessage(m);
        }
        t1 = now();
        /* The worst latency of each second of receiving: a tail at the start (connection,
         * first deliveries) or spread over the run (hiccups, a backlog). */
        printf("worst_ms_by_second");
        for (long i = 0, sec = 0; i < count; sec++) {
            long long worst = 0, end = at[0] + (sec + 1) * 1000000000LL;
            for (; i < count && at[i] < end; i++)
                if (lat[i] > worst) worst = lat[i];
            printf(" %.1f", worst / 1e6);
        }
        printf("\n");
        free(at);
        qsort(lat, count, sizeof(long long), cmp_ll);
        printf("latency_ms p50 %.3f p99 %.3f p999 %.3f max %.3f\n", pct_ms(lat, count, 50),
               pct_ms(lat, count, 99), pct_ms(lat, count, 99.9), lat[count - 1] / 1e6);
        free(lat);
    } else {
        fprintf(stderr, "unknown mode %s\n", mode);
        return 2;
    }
    /* CLOCK_MONOTONIC first and last, to add several processes up; the last line is
     * the one bench/c_client.py reads. */
    printf("span %.6f %.6f\n", t0, t1);
    printf("%s %ld messages in %.3f s\n", mode, count, t1 - t0);
    MQFreeDestination(d);
    MQCloseConnection(c);
    MQFreeConnection(c);
    return 0;
}
