/* SPDX-License-Identifier: MIT */
/*
 * httpfile - serve one file to every HTTP request on 127.0.0.1, so tests
 * can hand a replica a manifest of their choosing; GET /v1/models gets
 * a list naming one model "x" (or MODELS, a file of the test's).  Both
 * files are read again for every request: a test may change them.
 *
 *   httpfile FILE [STATUS [MODELS]]   prints "port N", serves until killed
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static char *slurp(const char *path, long *n)
{
	FILE *f = fopen(path, "rb");
	if (!f) {
		perror(path);
		exit(1);
	}
	fseek(f, 0, SEEK_END);
	*n = ftell(f);
	rewind(f);
	char *body = malloc((size_t)*n + 1);
	if (!body || fread(body, 1, (size_t)*n, f) != (size_t)*n)
		exit(1);
	fclose(f);
	return body;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: httpfile FILE [STATUS [MODELS]]\n");
		return 2;
	}
	long n, mn;
	char *body = slurp(argv[1], &n);
	int status = argc > 2 ? atoi(argv[2]) : 200;
	char *models =
		argc > 3
			? slurp(argv[3], &mn)
			: strdup("{\"instance\":\"0x1\",\"models\":[{\"model\":"
				 "\"x\",\"generation\":1,\"content\":\"0x1\","
				 "\"served\":[{\"generation\":1}]}]}");
	if (argc <= 3)
		mn = (long)strlen(models);

	int s = socket(AF_INET, SOCK_STREAM, 0), one = 1;
	struct sockaddr_in a = {.sin_family = AF_INET,
				.sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t al = sizeof(a);
	setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(s, (struct sockaddr *)&a, sizeof(a)) || listen(s, 16) ||
	    getsockname(s, (struct sockaddr *)&a, &al)) {
		perror("httpfile: listen");
		return 1;
	}
	printf("port %u\n", ntohs(a.sin_port));
	fflush(stdout);
	for (;;) {
		int c = accept(s, NULL, NULL);
		char req[4096], head[256];
		if (c < 0)
			continue;
		if (read(c, req, sizeof(req)) < 0) {
			close(c);
			continue;
		}
		int list = !strncmp(req, "GET /v1/models", 14);
		free(body);
		body = slurp(argv[1], &n);
		if (argc > 3) {
			free(models);
			models = slurp(argv[3], &mn);
		}
		int hl = snprintf(head, sizeof(head),
				  "HTTP/1.1 %d X\r\nContent-Length: %ld\r\n"
				  "Connection: close\r\n\r\n",
				  list ? 200 : status, list ? mn : n);
		if (write(c, head, (size_t)hl) < 0 ||
		    write(c, list ? models : body, (size_t)(list ? mn : n)) < 0)
			perror("httpfile: write");
		close(c);
	}
}
