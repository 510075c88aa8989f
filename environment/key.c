/* The key of a package set: requirement specifiers normalised (PEP 503 names, sorted, without
 * duplicates), the requirements file's bytes and the interpreter's version report, hashed with
 * SHA-256. */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <mbedtls/sha256.h>

#include "internal.h"

/* Bumped when the folder's layout or the way pip is run changes, so old folders are not used. */
#define KEY_FORMAT      "ptc-env-1"
#define VERSION_WAIT_MS 10000

static bool is_name_char(char c)
{
    return isalnum((unsigned char)c) || c == '-' || c == '_' || c == '.';
}

int env_spec_normalise(const char *spec, char *out, size_t len)
{
    if (spec == NULL || out == NULL || len == 0) return ENV_EINVAL;
    while (isspace((unsigned char)*spec))
        spec++;
    size_t n = strlen(spec);
    while (n > 0 && isspace((unsigned char)spec[n - 1]))
        n--;
    if (n == 0 || !isalnum((unsigned char)spec[0])) return ENV_EINVAL;
    if (n > ENV_MAX_SPEC_LEN) return ENV_ETOOBIG;

    size_t name_end = 0;
    while (name_end < n && is_name_char(spec[name_end]))
        name_end++;
    /* PEP 508: a name ends with a letter or digit */
    while (name_end > 0 && !isalnum((unsigned char)spec[name_end - 1]))
        name_end--;

    size_t o = 0;
#define PUT(ch)                                                                                    \
    do {                                                                                           \
        if (o + 1 >= len) return ENV_ETOOBIG;                                                      \
        out[o++] = (ch);                                                                           \
    } while (0)
    for (size_t i = 0; i < name_end; i++) {
        char c = spec[i];
        if (c == '-' || c == '_' || c == '.') {
            if (o > 0 && out[o - 1] == '-') continue;
            PUT('-');
        } else {
            PUT((char)tolower((unsigned char)c));
        }
    }
    /* Extras and version: white space means nothing there ("numpy >= 2" is "numpy>=2"). The
       environment marker after ';' keeps its inner spaces, which can sit inside quotes. */
    size_t i = name_end;
    for (; i < n && spec[i] != ';'; i++)
        if (!isspace((unsigned char)spec[i])) PUT(spec[i]);
    if (i < n) {
        i++;
        while (i < n && isspace((unsigned char)spec[i]))
            i++;
        PUT(';');
        PUT(' ');
        for (; i < n; i++)
            PUT(spec[i]);
    }
#undef PUT
    out[o] = '\0';
    return 0;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

void env_key_free(env_key_t *key)
{
    if (key == NULL) return;
    for (size_t i = 0; i < key->n_specs; i++)
        free(key->specs[i]);
    free(key->specs);
    free(key->python_version);
    free(key->requirements);
    memset(key, 0, sizeof *key);
}

static int hash_part(mbedtls_sha256_context *ctx, const char *s)
{
    /* the NUL too, so that parts cannot run into each other */
    return mbedtls_sha256_update_ret(ctx, (const unsigned char *)s, strlen(s) + 1);
}

int env_key_from_parts(const char *python_version, const char *const *specs, size_t n,
                       const char *requirements, env_key_t *key, char *msg, size_t msg_len)
{
    if (python_version == NULL || key == NULL || (n > 0 && specs == NULL)) return ENV_EINVAL;
    memset(key, 0, sizeof *key);
    if (n > ENV_MAX_SPECS) {
        env__msg(msg, msg_len, "%zu package specifiers: at most %u", n, ENV_MAX_SPECS);
        return ENV_ETOOBIG;
    }
    if (n == 0 && (requirements == NULL)) {
        env__msg(msg, msg_len, "no packages declared");
        return ENV_EINVAL;
    }
    int rc = ENV_ENOMEM;
    key->python_version = strdup(python_version);
    key->specs = calloc(n ? n : 1, sizeof *key->specs);
    if (requirements) key->requirements = strdup(requirements);
    if (!key->python_version || !key->specs || (requirements && !key->requirements)) goto fail;
    for (size_t i = 0; i < n; i++) {
        char buf[ENV_MAX_SPEC_LEN + 64];
        rc = env_spec_normalise(specs[i], buf, sizeof buf);
        if (rc != 0) {
            env__msg(msg, msg_len,
                     "package specifier \"%.200s\" is not a requirement (a name, then extras, "
                     "version and markers; options and paths go in --requirements)",
                     specs[i] ? specs[i] : "");
            goto fail;
        }
        rc = ENV_ENOMEM;
        if ((key->specs[key->n_specs] = strdup(buf)) == NULL) goto fail;
        key->n_specs++;
    }
    qsort(key->specs, key->n_specs, sizeof *key->specs, cmp_str);
    size_t w = 0;
    for (size_t i = 0; i < key->n_specs; i++) {
        if (w > 0 && strcmp(key->specs[w - 1], key->specs[i]) == 0) {
            free(key->specs[i]);
            continue;
        }
        key->specs[w++] = key->specs[i];
    }
    key->n_specs = w;

    mbedtls_sha256_context ctx;
    mbedtls_sha256_init(&ctx);
    unsigned char digest[32];
    int h = mbedtls_sha256_starts_ret(&ctx, 0);
    if (h == 0) h = hash_part(&ctx, KEY_FORMAT);
    if (h == 0) h = hash_part(&ctx, key->python_version);
    for (size_t i = 0; h == 0 && i < key->n_specs; i++)
        h = hash_part(&ctx, key->specs[i]);
    /* a marker between the list and the file: no spec list can look like a file */
    if (h == 0) h = hash_part(&ctx, key->requirements ? "\001requirements" : "\001none");
    if (h == 0 && key->requirements) h = hash_part(&ctx, key->requirements);
    if (h == 0) h = mbedtls_sha256_finish_ret(&ctx, digest);
    mbedtls_sha256_free(&ctx);
    if (h != 0) {
        rc = ENV_ENOMEM;
        goto fail;
    }
    env__hex(digest, key->hex);
    return 0;
fail:
    env_key_free(key);
    return rc;
}

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* Runs `python -I -S -c ENV__VERSION_CODE` and collects its stdout; bounded in time and size. */
static int ask_version(const char *python, char *out, size_t len, char *msg, size_t msg_len)
{
    int p[2];
    if (pipe2(p, O_CLOEXEC) != 0) return ENV_EIO;
    posix_spawn_file_actions_t fa;
    if (posix_spawn_file_actions_init(&fa) != 0) {
        close(p[0]);
        close(p[1]);
        return ENV_ENOMEM;
    }
    posix_spawn_file_actions_adddup2(&fa, p[1], 1);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    char a0[] = "python", a1[] = "-I", a2[] = "-S", a3[] = "-c";
    char code[] = ENV__VERSION_CODE;
    char *argv[] = {a0, a1, a2, a3, code, NULL};
    pid_t pid;
    int err = posix_spawn(&pid, python, &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(p[1]);
    if (err != 0) {
        close(p[0]);
        env__msg(msg, msg_len, "%s could not be run: %s", python, strerror(err));
        return ENV_EPYTHON;
    }
    size_t got = 0;
    bool timed_out = false;
    uint64_t deadline = now_ms() + VERSION_WAIT_MS;
    for (;;) {
        uint64_t t = now_ms();
        if (t >= deadline) {
            timed_out = true;
            break;
        }
        struct pollfd pf = {.fd = p[0], .events = POLLIN};
        int pr = poll(&pf, 1, (int)(deadline - t));
        if (pr < 0 && errno == EINTR) continue;
        if (pr <= 0) {
            timed_out = pr == 0;
            break;
        }
        char buf[512];
        ssize_t r = read(p[0], buf, sizeof buf);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        size_t take = (size_t)r < len - 1 - got ? (size_t)r : len - 1 - got;
        memcpy(out + got, buf, take);
        got += take;
    }
    close(p[0]);
    if (timed_out) kill(pid, SIGKILL);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    out[got] = '\0';
    if (timed_out || !WIFEXITED(status) || WEXITSTATUS(status) != 0 || got == 0) {
        env__msg(msg, msg_len, "%s did not report its version (%s)", python,
                 timed_out ? "no answer in 10 s" : "it failed");
        return ENV_EPYTHON;
    }
    return 0;
}

int env_key_compute(const char *python, const char *const *specs, size_t n,
                    const char *requirements_file, env_key_t *key, char *msg, size_t msg_len)
{
    if (python == NULL || key == NULL) return ENV_EINVAL;
    memset(key, 0, sizeof *key);
    char *req = NULL;
    if (requirements_file) {
        int rc = env__read_file(requirements_file, ENV_MAX_REQUIREMENTS_BYTES, &req, NULL);
        if (rc != 0) {
            env__msg(msg, msg_len, "requirements file %s: %s", requirements_file,
                     rc == ENV_ETOOBIG ? "larger than 256 KiB" : strerror(errno));
            return rc;
        }
    }
    char version[ENV__VERSION_MAX];
    int rc = ask_version(python, version, sizeof version, msg, msg_len);
    if (rc == 0) rc = env_key_from_parts(version, specs, n, req, key, msg, msg_len);
    free(req);
    return rc;
}
