/* transport_stdio.c - one MCP session over stdin/stdout: newline-delimited JSON, stdin as a
 * pipe, socket, TTY or regular file, and an orderly stop on EOF, SIGINT or SIGTERM. */
#include "internal.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define STDIO_READ_CHUNK 65536
/* Past this many queued output bytes the client is not reading: stop taking input until it
 * catches up, so a client that never reads cannot make us buffer without bound. */
#define STDIO_MAX_QUEUED_OUTPUT (64u << 20)

typedef union stdio_stream {
    uv_handle_t handle;
    uv_stream_t stream;
    uv_pipe_t pipe;
    uv_tty_t tty;
    uv_tcp_t tcp;
} stdio_stream_t;

typedef struct file_write {
    uv_fs_t req;
    struct mcp_stdio *io;
    uv_buf_t buf;
    struct file_write *next;
} file_write_t;

typedef struct stream_write {
    uv_write_t req;
    struct mcp_stdio *io;
    char *data;
    size_t len;
} stream_write_t;

struct mcp_stdio {
    mcp_server_t *srv;
    mcp_session_t *session;
    mcp_transport_ops_t ops;
    mcp_framer_t framer;
    size_t max_message;

    int in_fd, out_fd;
    bool in_is_file, out_is_file;
    stdio_stream_t in, out;
    bool in_open, out_open;
    bool reading, read_paused;
    uv_fs_t read_req;
    bool read_busy;
    char *read_buf;

    file_write_t *wq_head, *wq_tail;
    bool wq_busy;
    size_t queued_bytes;

    uv_signal_t sig_int, sig_term;
    uv_timer_t defer;
    int open_handles;

    bool stopping, session_idle, write_failed, done, freed;
    mcp_stdio_done_cb done_cb;
    void *done_data;
};

static void maybe_done(mcp_stdio_t *io);
static void start_reading(mcp_stdio_t *io);

/* --- output -------------------------------------------------------------------------------- */

static void on_write_error(mcp_stdio_t *io, int status)
{
    if (!io->write_failed)
        mcp_log(io->srv->lg, MCP_LOG_ERROR, "stdout write failed: %s; stopping",
                uv_strerror(status));
    io->write_failed = true;
    mcp_stdio_stop(io);
}

static void after_output(mcp_stdio_t *io, size_t len)
{
    io->queued_bytes -= len;
    if (io->read_paused && io->queued_bytes < STDIO_MAX_QUEUED_OUTPUT / 2) {
        io->read_paused = false;
        start_reading(io);
    }
    maybe_done(io);
}

static void file_write_next(mcp_stdio_t *io);

static void on_file_written(uv_fs_t *req)
{
    file_write_t *w = req->data;
    mcp_stdio_t *io = w->io;
    ssize_t r = req->result;
    uv_fs_req_cleanup(req);
    if (r >= 0 && (size_t)r < w->buf.len) {
        /* Short write: keep the rest at the head of the queue. */
        memmove(w->buf.base, w->buf.base + r, w->buf.len - (size_t)r);
        io->queued_bytes -= (size_t)r;
        w->buf.len -= (size_t)r;
        io->wq_busy = false;
        file_write_next(io);
        return;
    }
    io->wq_head = w->next;
    if (io->wq_head == NULL) io->wq_tail = NULL;
    io->wq_busy = false;
    size_t len = w->buf.len;
    free(w->buf.base);
    free(w);
    if (r < 0) on_write_error(io, (int)r);
    file_write_next(io);
    after_output(io, len);
}

static void file_write_next(mcp_stdio_t *io)
{
    if (io->wq_busy || io->wq_head == NULL) return;
    if (io->write_failed) {
        /* Drain the queue without writing (a loop: the queue may hold many messages). */
        size_t len = 0;
        while (io->wq_head != NULL) {
            file_write_t *w = io->wq_head;
            io->wq_head = w->next;
            len += w->buf.len;
            free(w->buf.base);
            free(w);
        }
        io->wq_tail = NULL;
        after_output(io, len);
        return;
    }
    file_write_t *w = io->wq_head;
    io->wq_busy = true;
    w->req.data = w;
    int rc = uv_fs_write(io->srv->loop, &w->req, io->out_fd, &w->buf, 1, -1, on_file_written);
    if (rc < 0) {
        io->wq_busy = false;
        on_write_error(io, rc);
    }
}

static void on_stream_written(uv_write_t *req, int status)
{
    stream_write_t *w = req->data;
    mcp_stdio_t *io = w->io;
    size_t len = w->len;
    free(w->data);
    free(w);
    if (status < 0) on_write_error(io, status);
    after_output(io, len);
}

static int stdio_send(void *tdata, const char *json, size_t len)
{
    mcp_stdio_t *io = tdata;
    if (io->write_failed || !io->out_open) return MCP_ECLOSED;
    char *data = malloc(len + 1);
    if (data == NULL) return MCP_ENOMEM;
    memcpy(data, json, len);
    data[len] = '\n';
    if (io->out_is_file) {
        file_write_t *w = calloc(1, sizeof *w);
        if (w == NULL) {
            free(data);
            return MCP_ENOMEM;
        }
        w->io = io;
        w->buf = uv_buf_init(data, (unsigned)(len + 1));
        if (io->wq_tail)
            io->wq_tail->next = w;
        else
            io->wq_head = w;
        io->wq_tail = w;
        io->queued_bytes += len + 1;
        file_write_next(io);
    } else {
        stream_write_t *w = calloc(1, sizeof *w);
        if (w == NULL) {
            free(data);
            return MCP_ENOMEM;
        }
        w->io = io;
        w->data = data;
        w->len = len + 1;
        w->req.data = w;
        uv_buf_t buf = uv_buf_init(data, (unsigned)(len + 1));
        io->queued_bytes += len + 1;
        int rc = uv_write(&w->req, &io->out.stream, &buf, 1, on_stream_written);
        if (rc < 0) {
            io->queued_bytes -= len + 1;
            free(data);
            free(w);
            on_write_error(io, rc);
            return MCP_EIO;
        }
    }
    if (io->queued_bytes > STDIO_MAX_QUEUED_OUTPUT && io->reading && !io->in_is_file) {
        uv_read_stop(&io->in.stream);
        io->reading = false;
        io->read_paused = true;
    } else if (io->queued_bytes > STDIO_MAX_QUEUED_OUTPUT) {
        io->read_paused = true;
    }
    return MCP_OK;
}

/* --- input --------------------------------------------------------------------------------- */

static void on_line(void *data, const char *line, size_t len, bool too_big)
{
    mcp_stdio_t *io = data;
    if (too_big) {
        mcp_session_reject_oversized(io->session, len, io->max_message);
        return;
    }
    /* Blank lines between messages are tolerated. */
    size_t i = 0;
    while (i < len && (line[i] == ' ' || line[i] == '\t'))
        i++;
    if (i == len) return;
    mcp_session_receive(io->session, line, len);
}

static void on_eof(mcp_stdio_t *io)
{
    mcp_framer_finish(&io->framer);
    mcp_log(io->srv->lg, MCP_LOG_INFO, "stdin closed; finishing work in flight");
    mcp_stdio_stop(io);
}

static void alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    mcp_stdio_t *io = h->data;
    (void)suggested;
    buf->base = io->read_buf;
    buf->len = STDIO_READ_CHUNK;
}

static void on_stream_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
    mcp_stdio_t *io = s->data;
    if (n > 0) {
        if (mcp_framer_feed(&io->framer, buf->base, (size_t)n) < 0)
            mcp_log(io->srv->lg, MCP_LOG_ERROR,
                    "out of memory buffering input; a message was "
                    "dropped");
        return;
    }
    if (n == UV_EOF || n < 0) {
        if (n != UV_EOF)
            mcp_log(io->srv->lg, MCP_LOG_WARNING, "stdin read failed: %s", uv_strerror((int)n));
        uv_read_stop(s);
        io->reading = false;
        on_eof(io);
    }
}

static void on_file_read(uv_fs_t *req)
{
    mcp_stdio_t *io = req->data;
    ssize_t n = req->result;
    uv_fs_req_cleanup(req);
    io->read_busy = false;
    if (n > 0) {
        if (mcp_framer_feed(&io->framer, io->read_buf, (size_t)n) < 0)
            mcp_log(io->srv->lg, MCP_LOG_ERROR, "out of memory buffering input");
        if (!io->stopping) start_reading(io);
        maybe_done(io);
        return;
    }
    io->reading = false;
    if (n < 0) mcp_log(io->srv->lg, MCP_LOG_WARNING, "stdin read failed: %s", uv_strerror((int)n));
    if (!io->stopping) on_eof(io);
    maybe_done(io);
}

static void start_reading(mcp_stdio_t *io)
{
    if (io->stopping || io->read_paused) return;
    if (io->in_is_file) {
        if (io->read_busy) return;
        uv_buf_t buf = uv_buf_init(io->read_buf, STDIO_READ_CHUNK);
        io->read_req.data = io;
        if (uv_fs_read(io->srv->loop, &io->read_req, io->in_fd, &buf, 1, -1, on_file_read) == 0) {
            io->read_busy = true;
            io->reading = true;
        } else {
            on_eof(io);
        }
        return;
    }
    if (!io->reading && uv_read_start(&io->in.stream, alloc_cb, on_stream_read) == 0)
        io->reading = true;
}

/* --- lifecycle ----------------------------------------------------------------------------- */

static void on_handle_closed(uv_handle_t *h)
{
    mcp_stdio_t *io = h->data;
    if (--io->open_handles == 0 && io->freed) {
        mcp_framer_close(&io->framer);
        free(io->read_buf);
        free(io);
    }
}

static void close_handle(mcp_stdio_t *io, uv_handle_t *h)
{
    if (h->type == UV_UNKNOWN_HANDLE || uv_is_closing(h)) return;
    h->data = io;
    uv_close(h, on_handle_closed);
}

static void on_defer(uv_timer_t *t)
{
    mcp_stdio_t *io = t->data;
    if (io->done || !io->session_idle) return;
    if (io->queued_bytes > 0 || io->read_busy) return; /* maybe_done runs again when they end */
    io->done = true;
    io->done_cb(io, io->done_data);
}

static void maybe_done(mcp_stdio_t *io)
{
    if (io->done || !io->session_idle || io->queued_bytes > 0 || io->read_busy) return;
    /* Report from a fresh loop turn, so the owner may free us with nothing of ours on the
     * stack. */
    uv_timer_start(&io->defer, on_defer, 0, 0);
}

static void on_session_idle(mcp_session_t *s, void *data)
{
    mcp_stdio_t *io = data;
    (void)s;
    io->session_idle = true;
    maybe_done(io);
}

void mcp_stdio_stop(mcp_stdio_t *io)
{
    if (io->stopping) return;
    io->stopping = true;
    if (io->reading && !io->in_is_file) {
        uv_read_stop(&io->in.stream);
        io->reading = false;
    }
    /* The signal handlers stay: a signal during the stop cuts the grace period short. Their
     * handles are unreferenced so that they do not keep the loop alive. */
    uv_unref((uv_handle_t *)&io->sig_int);
    uv_unref((uv_handle_t *)&io->sig_term);
    mcp_session_shutdown(io->session, on_session_idle, io);
}

static void on_signal(uv_signal_t *h, int signum)
{
    mcp_stdio_t *io = h->data;
    const char *name = signum == SIGINT ? "SIGINT" : "SIGTERM";
    if (io->stopping) {
        mcp_log(io->srv->lg, MCP_LOG_INFO, "received %s while stopping; cancelling work in flight",
                name);
        mcp_session_shutdown(io->session, on_session_idle, io);
        return;
    }
    mcp_log(io->srv->lg, MCP_LOG_INFO, "received %s; finishing work in flight", name);
    mcp_stdio_stop(io);
}

static int open_stream(uv_loop_t *loop, int fd, stdio_stream_t *st, bool *is_file, bool readable)
{
    uv_handle_type t = uv_guess_handle(fd);
    int rc;
    switch (t) {
    case UV_TTY:
        rc = uv_tty_init(loop, &st->tty, fd, readable);
        break;
    case UV_NAMED_PIPE:
        rc = uv_pipe_init(loop, &st->pipe, 0);
        if (rc == 0) rc = uv_pipe_open(&st->pipe, fd);
        break;
    case UV_TCP:
        rc = uv_tcp_init(loop, &st->tcp);
        if (rc == 0) rc = uv_tcp_open(&st->tcp, fd);
        break;
    case UV_FILE:
    case UV_UNKNOWN_HANDLE:
    default:
        /* Regular files and character devices such as /dev/null cannot be polled: they are
         * read and written through the thread pool instead. */
        *is_file = true;
        return 0;
    }
    *is_file = false;
    return rc;
}

int mcp_stdio_start(mcp_server_t *srv, int in_fd, int out_fd, size_t max_message_bytes,
                    mcp_stdio_done_cb done_cb, void *data, mcp_stdio_t **out)
{
    *out = NULL;
    if (done_cb == NULL || max_message_bytes == 0) return MCP_EINVAL;
    mcp_stdio_t *io = calloc(1, sizeof *io);
    if (io == NULL) return MCP_ENOMEM;
    uv_loop_t *loop = srv->loop;
    io->srv = srv;
    io->in_fd = in_fd;
    io->out_fd = out_fd;
    io->max_message = max_message_bytes;
    io->done_cb = done_cb;
    io->done_data = data;
    io->ops.send = stdio_send;
    io->read_buf = malloc(STDIO_READ_CHUNK);
    int rc =
        io->read_buf ? mcp_framer_init(&io->framer, max_message_bytes, on_line, io) : MCP_ENOMEM;
    if (rc < 0) {
        free(io->read_buf);
        free(io);
        return rc;
    }
    /* Handles are initialised one by one; each counts toward open_handles so that a partial
     * start can be closed the same way as a full one. */
    rc = uv_timer_init(loop, &io->defer);
    if (rc == 0) {
        io->open_handles++;
        io->defer.data = io;
        rc = uv_signal_init(loop, &io->sig_int);
    }
    if (rc == 0) {
        io->open_handles++;
        io->sig_int.data = io;
        rc = uv_signal_init(loop, &io->sig_term);
    }
    if (rc == 0) {
        io->open_handles++;
        io->sig_term.data = io;
        rc = open_stream(loop, in_fd, &io->in, &io->in_is_file, true);
    }
    if (rc == 0) {
        if (!io->in_is_file) {
            io->open_handles++;
            io->in_open = true;
            io->in.handle.data = io;
        }
        rc = open_stream(loop, out_fd, &io->out, &io->out_is_file, false);
    }
    if (rc == 0) {
        if (!io->out_is_file) {
            io->open_handles++;
            io->out.handle.data = io;
        }
        io->out_open = true;
        rc = mcp_session_new(srv, &io->ops, io, &io->session);
    }
    if (rc == 0) rc = uv_signal_start(&io->sig_int, on_signal, SIGINT);
    if (rc == 0) rc = uv_signal_start(&io->sig_term, on_signal, SIGTERM);
    if (rc != 0) {
        mcp_log(srv->lg, MCP_LOG_ERROR, "stdio transport: %s",
                rc < 0 && rc >= MCP_ESTATE ? mcp_strerror(rc) : uv_strerror(rc));
        io->done = true;
        mcp_stdio_free(io);
        return MCP_EIO;
    }
    start_reading(io);
    *out = io;
    return MCP_OK;
}

void mcp_stdio_free(mcp_stdio_t *io)
{
    if (io == NULL) return;
    if (io->session != NULL) {
        mcp_session_free(io->session);
        io->session = NULL;
    }
    /* Output still queued for a file is dropped: free is called after done, when none is. */
    while (io->wq_head != NULL && !io->wq_busy) {
        file_write_t *w = io->wq_head;
        io->wq_head = w->next;
        free(w->buf.base);
        free(w);
    }
    io->freed = true;
    close_handle(io, (uv_handle_t *)&io->defer);
    close_handle(io, (uv_handle_t *)&io->sig_int);
    close_handle(io, (uv_handle_t *)&io->sig_term);
    if (io->in_open) close_handle(io, &io->in.handle);
    if (io->out_open && !io->out_is_file) close_handle(io, &io->out.handle);
    if (io->open_handles == 0) {
        mcp_framer_close(&io->framer);
        free(io->read_buf);
        free(io);
    }
}
