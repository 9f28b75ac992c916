# Builds QuickJS-ng's qjs with plain make, no CMake (-O2, no debug information):
# make -f qjs.mk -j2. Every object depends on every header, so that an in-place
# rebuild after a checkout (git bisect) never keeps a stale object.
CC ?= cc
CFLAGS = -O2 -g0 -D_GNU_SOURCE -DNDEBUG -w
SRCS = cutils.c libbf.c libregexp.c libunicode.c quickjs.c quickjs-libc.c qjs.c gen/repl.c gen/standalone.c
OBJS = $(SRCS:.c=.o)
qjs: $(OBJS)
	$(CC) -o $@ $(OBJS) -lm -lpthread -ldl
$(OBJS): $(wildcard *.h)
%.o: %.c
	$(CC) $(CFLAGS) -I. -c -o $@ $<
