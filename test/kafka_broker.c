/*-------------------------------------------------------------------------
 *
 * kafka_broker.c
 *		  The embedded Kafka broker used by the tests, the demo and the
 *		  benchmarks: librdkafka's mock cluster on loopback
 *
 * There is no Kafka broker package on our machines, so this program stands
 * in for one.  It creates a librdkafka mock cluster (rdkafka_mock.h), whose
 * brokers listen on 127.0.0.1 at ports chosen by the kernel, and keeps it up
 * until SIGTERM or SIGINT.  Clients (kcat, our workers) speak the real Kafka
 * protocol to it.
 *
 * Once the cluster is up, the program writes a small "key=value" file
 * (--ready-file, written whole by rename) and the same lines on stdout:
 *
 *		bootstrap=127.0.0.1:41235
 *		control=127.0.0.1:41236
 *		pid=12345
 *
 * The control address accepts one command per TCP connection, a line of
 * text, and answers "ok" or "error: <reason>":
 *
 *		create-topic <name> <partitions>
 *		broker-down <id>
 *		broker-up <id>
 *		ping
 *
 * Limits of the mock cluster: messages live in memory, and each partition
 * keeps only a few MiB (older messages are dropped silently), so big data
 * sets need many partitions.  It writes no transaction markers: with
 * --txn-topic, the program serves a fixed log of transactions instead
 * (kafka_txn_broker.c).
 *
 * IDENTIFICATION
 *		  test/kafka_broker.c
 *
 *-------------------------------------------------------------------------
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>

extern int	txn_broker_main(int argc, char **argv);

static volatile sig_atomic_t stop_requested = 0;

static void
handle_stop(int signo)
{
	(void) signo;
	stop_requested = 1;
}

static void
usage(const char *progname)
{
	fprintf(stderr,
			"Usage: %s [--brokers N] [--topic NAME:PARTITIONS]... [--ready-file PATH]\n"
			"\n"
			"Runs a librdkafka mock Kafka cluster on 127.0.0.1 until SIGTERM.\n"
			"  --brokers N                 number of brokers (default 1)\n"
			"  --topic NAME:PARTITIONS     create a topic before announcing readiness\n"
			"  --ready-file PATH           write bootstrap/control addresses there\n",
			progname);
	exit(2);
}

/*
 * Create a topic on the mock cluster; returns an error text or NULL.
 */
static const char *
create_topic(rd_kafka_mock_cluster_t *mcluster, const char *name,
			 int partitions)
{
	rd_kafka_resp_err_t err;

	if (partitions < 1 || partitions > 10000)
		return "partitions must be between 1 and 10000";
	err = rd_kafka_mock_topic_create(mcluster, name, partitions, 1);
	if (err != RD_KAFKA_RESP_ERR_NO_ERROR)
		return rd_kafka_err2str(err);
	return NULL;
}

/*
 * Run one control command and write the answer to the connection.
 */
static void
serve_control(rd_kafka_mock_cluster_t *mcluster, int conn)
{
	char		line[512];
	size_t		len = 0;
	char		name[256];
	char		answer[600];
	const char *error = NULL;
	int			number;

	/* read one line (commands are short; a slow client just gets an error) */
	while (len < sizeof(line) - 1)
	{
		struct pollfd pfd = {.fd = conn,.events = POLLIN};
		ssize_t		n;

		if (poll(&pfd, 1, 2000) <= 0)
			break;
		n = read(conn, line + len, sizeof(line) - 1 - len);
		if (n <= 0)
			break;
		len += n;
		if (memchr(line, '\n', len))
			break;
	}
	line[len] = '\0';
	line[strcspn(line, "\r\n")] = '\0';

	if (strcmp(line, "ping") == 0)
		error = NULL;
	else if (sscanf(line, "create-topic %255s %d", name, &number) == 2)
		error = create_topic(mcluster, name, number);
	else if (sscanf(line, "broker-down %d", &number) == 1)
	{
		if (rd_kafka_mock_broker_set_down(mcluster, number) != RD_KAFKA_RESP_ERR_NO_ERROR)
			error = "no such broker";
	}
	else if (sscanf(line, "broker-up %d", &number) == 1)
	{
		if (rd_kafka_mock_broker_set_up(mcluster, number) != RD_KAFKA_RESP_ERR_NO_ERROR)
			error = "no such broker";
	}
	else
		error = "unknown command";

	if (error)
		snprintf(answer, sizeof(answer), "error: %s\n", error);
	else
		snprintf(answer, sizeof(answer), "ok\n");
	if (write(conn, answer, strlen(answer)) < 0)
		perror("kafka_broker: write");
}

/*
 * Open the control listener on 127.0.0.1 at a kernel-chosen port.
 */
static int
open_control_socket(int *port)
{
	struct sockaddr_in addr;
	socklen_t	addrlen = sizeof(addr);
	int			fd;

	fd = socket(AF_INET, SOCK_STREAM, 0);
	if (fd < 0)
		return -1;
	memset(&addr, 0, sizeof(addr));
	addr.sin_family = AF_INET;
	addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	addr.sin_port = 0;
	if (bind(fd, (struct sockaddr *) &addr, sizeof(addr)) < 0 ||
		listen(fd, 16) < 0 ||
		getsockname(fd, (struct sockaddr *) &addr, &addrlen) < 0)
	{
		close(fd);
		return -1;
	}
	*port = ntohs(addr.sin_port);
	return fd;
}

/*
 * Write the ready file whole: to a temporary name, then rename.
 */
static int
write_ready_file(const char *path, const char *contents)
{
	char		tmp[4096];
	FILE	   *f;

	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	f = fopen(tmp, "w");
	if (!f)
		return -1;
	fputs(contents, f);
	if (fclose(f) != 0)
		return -1;
	return rename(tmp, path);
}

int
main(int argc, char **argv)
{
	int			nbrokers = 1;
	const char *ready_file = NULL;
	char		errstr[512];
	rd_kafka_conf_t *conf;
	rd_kafka_t *rk;
	rd_kafka_mock_cluster_t *mcluster;
	struct sigaction sa;
	sigset_t	blocked,
				previous;
	int			control_fd,
				control_port;
	char		announce[1024];
	int			i;

	for (i = 1; i < argc; i++)
		if (strcmp(argv[i], "--txn-topic") == 0)
			return txn_broker_main(argc, argv);

	/* librdkafka's threads must not take our signals: block them first */
	sigemptyset(&blocked);
	sigaddset(&blocked, SIGTERM);
	sigaddset(&blocked, SIGINT);
	sigaddset(&blocked, SIGPIPE);
	pthread_sigmask(SIG_BLOCK, &blocked, &previous);

	conf = rd_kafka_conf_new();
	/* the handle only carries the cluster; keep its own logging quiet */
	if (rd_kafka_conf_set(conf, "log_level", "3", errstr, sizeof(errstr)) != RD_KAFKA_CONF_OK)
	{
		fprintf(stderr, "kafka_broker: %s\n", errstr);
		return 1;
	}
	rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof(errstr));
	if (!rk)
	{
		fprintf(stderr, "kafka_broker: could not create handle: %s\n", errstr);
		return 1;
	}

	/* the broker count must be known before the cluster is created */
	for (i = 1; i < argc; i++)
	{
		if (strcmp(argv[i], "--brokers") == 0 && i + 1 < argc)
			nbrokers = atoi(argv[++i]);
		else if (strcmp(argv[i], "--ready-file") == 0 && i + 1 < argc)
			ready_file = argv[++i];
		else if (strcmp(argv[i], "--topic") == 0 && i + 1 < argc)
			i++;				/* created below */
		else
			usage(argv[0]);
	}
	if (nbrokers < 1 || nbrokers > 16)
		usage(argv[0]);

	mcluster = rd_kafka_mock_cluster_new(rk, nbrokers);
	if (!mcluster)
	{
		fprintf(stderr, "kafka_broker: could not create mock cluster\n");
		return 1;
	}

	for (i = 1; i < argc; i++)
	{
		if (strcmp(argv[i], "--topic") == 0)
		{
			char	   *spec = argv[++i];
			char	   *colon = strrchr(spec, ':');
			const char *error;

			if (!colon)
				usage(argv[0]);
			*colon = '\0';
			error = create_topic(mcluster, spec, atoi(colon + 1));
			if (error)
			{
				fprintf(stderr, "kafka_broker: topic \"%s\": %s\n", spec, error);
				return 1;
			}
		}
		else if (strcmp(argv[i], "--brokers") == 0 ||
				 strcmp(argv[i], "--ready-file") == 0)
			i++;
	}

	control_fd = open_control_socket(&control_port);
	if (control_fd < 0)
	{
		perror("kafka_broker: control socket");
		return 1;
	}

	snprintf(announce, sizeof(announce),
			 "bootstrap=%s\ncontrol=127.0.0.1:%d\npid=%d\n",
			 rd_kafka_mock_cluster_bootstraps(mcluster), control_port,
			 (int) getpid());
	if (ready_file && write_ready_file(ready_file, announce) != 0)
	{
		perror("kafka_broker: ready file");
		return 1;
	}
	fputs(announce, stdout);
	fflush(stdout);

	/* now take SIGTERM/SIGINT on this thread only */
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = handle_stop;
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	pthread_sigmask(SIG_SETMASK, &previous, NULL);

	while (!stop_requested)
	{
		struct pollfd pfd = {.fd = control_fd,.events = POLLIN};

		if (poll(&pfd, 1, 1000) > 0 && (pfd.revents & POLLIN))
		{
			int			conn = accept(control_fd, NULL, NULL);

			if (conn >= 0)
			{
				serve_control(mcluster, conn);
				close(conn);
			}
		}
	}

	close(control_fd);
	rd_kafka_mock_cluster_destroy(mcluster);
	rd_kafka_destroy(rk);
	if (ready_file)
		unlink(ready_file);
	return 0;
}
