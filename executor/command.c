/* Turns exec_options_t into the launcher's command line and the sandbox environment. */
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

/* the fixed environment of every run; PYTHON* are ignored under -I but document the intent.
   PTC_OUTPUT_DIR's value is joined with the folder's name on purpose (not a missing comma); the
   Landlock-only mode sets its own. */
static const char *const base_env[] = {
    "PATH=/usr/local/bin:/usr/bin:/bin",
    "LANG=C.UTF-8",
    "LC_ALL=C.UTF-8",
    "HOME=/tmp",
    "TMPDIR=/tmp",
    "USER=sandbox",
    "LOGNAME=sandbox",
    "PYTHONDONTWRITEBYTECODE=1",
    "PYTHONUNBUFFERED=1",
    "PTC_OUTPUT_DIR=/tmp/" EXEC_OUTPUT_DIR_NAME, /* NOLINT(bugprone-suspicious-missing-comma) */
    "MPLBACKEND=Agg", /* matplotlib draws to files: there is no display */
};

/* destinations a --mount may not cover: the view would stop working */
static const char *const reserved_dst[] = {"/", "/usr", "/etc", "/tmp", "/proc", "/dev"};

void exec_options_init(exec_options_t *opts)
{
    memset(opts, 0, sizeof *opts);
    opts->python = EXEC_DEFAULT_PYTHON;
    opts->max_queue = EXEC_DEFAULT_MAX_QUEUE;
    opts->memory_bytes = EXEC_DEFAULT_MEMORY_BYTES;
    opts->tmp_bytes = EXEC_DEFAULT_TMP_BYTES;
    opts->pids_max = EXEC_DEFAULT_PIDS;
    opts->cpu_millis = EXEC_DEFAULT_CPU_MILLIS;
    opts->stdout_keep = EXEC_DEFAULT_KEEP_BYTES;
    opts->stderr_keep = EXEC_DEFAULT_KEEP_BYTES;
    opts->progress_ms = EXEC_DEFAULT_PROGRESS_MS;
    opts->keep_warm = true;
    /* On unless turned off (docs/sandbox.md): "0", "off", "no" or "false", in any case; a
       spelling of "off" that left it on would surprise whoever wrote it. */
    const char *z = getenv(EXEC_ZYGOTE_ENV);
    opts->zygote = !(z && (strcmp(z, "0") == 0 || strcasecmp(z, "off") == 0 ||
                           strcasecmp(z, "no") == 0 || strcasecmp(z, "false") == 0));
}

static int fail(struct exec__cmd *cmd, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int fail(struct exec__cmd *cmd, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd->error, sizeof cmd->error, fmt, ap);
    va_end(ap);
    return code;
}

static int add_arg(struct exec__cmd *cmd, const char *a, const char *b)
{
    if (cmd->n_args + 2 >= EXEC_MAX_ARGS) return EXEC_EINVAL;
    char *x = strdup(a), *y = b ? strdup(b) : NULL;
    if (!x || (b && !y)) {
        free(x);
        free(y);
        return EXEC_ENOMEM;
    }
    cmd->args[cmd->n_args++] = x;
    if (y) cmd->args[cmd->n_args++] = y;
    return 0;
}

static int add_env(struct exec__cmd *cmd, const char *name, const char *value)
{
    if (cmd->n_env + 1 >= EXEC_MAX_ENV) return EXEC_EINVAL;
    size_t len = strlen(name) + (value ? strlen(value) + 1 : 0) + 1;
    char *s = malloc(len);
    if (!s) return EXEC_ENOMEM;
    snprintf(s, len, value ? "%s=%s" : "%s", name, value ? value : "");
    cmd->env[cmd->n_env++] = s;
    return 0;
}

static bool valid_env_name(const char *n)
{
    if (!n || !*n || strncmp(n, "LD_", 3) == 0) return false; /* the launcher would load them */
    for (const char *p = n; *p; p++) {
        bool ok = (*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') || *p == '_' ||
                  (p != n && *p >= '0' && *p <= '9');
        if (!ok) return false;
    }
    return strlen(n) < 128;
}

/* absolute, no "." or ".." parts, no "//", no trailing slash, no ':' */
static bool clean_abs_path(const char *p)
{
    if (p[0] != '/' || strchr(p, ':')) return false;
    size_t len = strlen(p);
    if (len >= PATH_MAX || (len > 1 && p[len - 1] == '/')) return false;
    for (const char *s = p; *s; s++) {
        if (s[0] != '/') continue;
        if (s[1] == '/') return false;
        if (s[1] == '.' && (s[2] == '/' || s[2] == '\0')) return false;
        if (s[1] == '.' && s[2] == '.' && (s[3] == '/' || s[3] == '\0')) return false;
    }
    return true;
}

static bool under(const char *path, const char *dir)
{
    size_t n = strlen(dir);
    return strncmp(path, dir, n) == 0 && (path[n] == '/' || path[n] == '\0');
}

static int add_mount(struct exec__cmd *cmd, const char *spec)
{
    char buf[2 * PATH_MAX + 8];
    size_t len = strlen(spec);
    if (len >= sizeof buf) return fail(cmd, EXEC_EINVAL, "--mount %s: too long", spec);
    memcpy(buf, spec, len + 1);
    const char *mode = "ro";
    char *dst = strchr(buf, ':');
    if (!dst) return fail(cmd, EXEC_EINVAL, "--mount %s: expected HOST:PATH[:ro|rw]", spec);
    *dst++ = '\0';
    char *m = strchr(dst, ':');
    if (m) {
        *m++ = '\0';
        if (strcmp(m, "ro") != 0 && strcmp(m, "rw") != 0)
            return fail(cmd, EXEC_EINVAL, "--mount %s: mode must be ro or rw", spec);
        mode = m;
    }
    if (!clean_abs_path(dst))
        return fail(cmd, EXEC_EINVAL, "--mount %s: PATH must be a clean absolute path", spec);
    for (size_t i = 0; i < sizeof reserved_dst / sizeof reserved_dst[0]; i++)
        if (strcmp(dst, reserved_dst[i]) == 0 || under(dst, "/proc") || under(dst, "/dev"))
            return fail(cmd, EXEC_EINVAL, "--mount %s: %s is reserved by the sandbox", spec, dst);
    char real[PATH_MAX];
    if (buf[0] != '/' || !realpath(buf, real))
        return fail(cmd, EXEC_EINVAL, "--mount %s: HOST must be an existing absolute path", spec);
    if (strchr(real, ':'))
        return fail(cmd, EXEC_EINVAL, "--mount %s: HOST may not contain ':'", spec);
    char out[2 * PATH_MAX + 8];
    snprintf(out, sizeof out, "%s:%s:%s", real, dst, mode);
    return add_arg(cmd, "--mount", out);
}

static char *find_launcher(const char *given)
{
    if (given) return access(given, X_OK) == 0 ? strdup(given) : NULL;
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n > 0) {
        self[n] = '\0';
        char cand[PATH_MAX + sizeof EXEC_LAUNCHER_NAME + 1];
        snprintf(cand, sizeof cand, "%s/%s", dirname(self), EXEC_LAUNCHER_NAME);
        if (access(cand, X_OK) == 0) return strdup(cand);
    }
#ifdef PTC_LAUNCHER_BUILD_PATH
    if (access(PTC_LAUNCHER_BUILD_PATH, X_OK) == 0) return strdup(PTC_LAUNCHER_BUILD_PATH);
#endif
    return NULL;
}

/* the interpreter's installation prefix (…/bin/python3 -> …) */
static void parent_of_bin(const char *path, char *out, size_t len)
{
    char tmp[PATH_MAX];
    snprintf(tmp, sizeof tmp, "%s", path);
    char *d = dirname(tmp);
    char tmp2[PATH_MAX];
    snprintf(tmp2, sizeof tmp2, "%s", d);
    snprintf(out, len, "%s", dirname(tmp2));
}

static int setup_python(const exec_options_t *opts, struct exec__cmd *cmd)
{
    const char *py = opts->python ? opts->python : EXEC_DEFAULT_PYTHON;
    char real[PATH_MAX];
    if (py[0] != '/' || !realpath(py, real) || access(real, X_OK) < 0)
        return fail(cmd, EXEC_EPYTHON, "python %s: not an executable absolute path", py);
    char head[2] = {0};
    int fd = open(real, O_RDONLY | O_CLOEXEC);
    if (fd < 0 || read(fd, head, 2) != 2) {
        if (fd >= 0) close(fd);
        return fail(cmd, EXEC_EPYTHON, "python %s: cannot read it", py);
    }
    close(fd);
    if (head[0] == '#' && head[1] == '!')
        return fail(cmd, EXEC_EPYTHON,
                    "python %s is a script (a pyenv shim?): pass the real binary", py);
    char prefix[PATH_MAX], given_prefix[PATH_MAX], cfgpath[PATH_MAX + 16];
    parent_of_bin(real, prefix, sizeof prefix);
    parent_of_bin(py, given_prefix, sizeof given_prefix);
    int r;
    bool venv = false;
    snprintf(cfgpath, sizeof cfgpath, "%s/pyvenv.cfg", given_prefix);
    if (strcmp(given_prefix, prefix) != 0 && access(cfgpath, R_OK) == 0 &&
        !under(given_prefix, "/usr")) {
        if ((r = add_arg(cmd, "--prefix", given_prefix)) < 0) return r;
        venv = true;
    }
    if (!under(prefix, "/usr") && strcmp(prefix, "/") != 0) {
        if (!clean_abs_path(prefix))
            return fail(cmd, EXEC_EPYTHON, "python prefix %s: unusual path", prefix);
        if ((r = add_arg(cmd, "--prefix", prefix)) < 0) return r;
    }
    /* run the path as given when the sandbox shows it (venvs need that), else the real file */
    bool visible = venv || under(py, "/usr") || under(py, prefix);
    cmd->python = strdup(visible ? py : real);
    if (!cmd->python) return EXEC_ENOMEM;
    return add_arg(cmd, "--python", cmd->python);
}

int exec__cmd_build(const exec_options_t *opts, struct exec__cmd *cmd)
{
    int r;
    char num[32];
    if (!opts) return fail(cmd, EXEC_EINVAL, "no options");
    if (opts->n_mounts > EXEC_MAX_MOUNTS || opts->n_pass_env > EXEC_MAX_PASS_ENV)
        return fail(cmd, EXEC_EINVAL, "too many --mount or --pass-env values");
    if (opts->memory_bytes < (16ull << 20) || opts->tmp_bytes < (1ull << 20) ||
        opts->pids_max < 4 || opts->pids_max > 4096)
        return fail(cmd, EXEC_EINVAL, "memory, tmpfs or pids limit out of range");
    if (opts->cpu_millis < EXEC_MIN_CPU_MILLIS || opts->cpu_millis > EXEC_MAX_CPU_MILLIS)
        return fail(cmd, EXEC_EINVAL, "CPU share out of range (%u to %u thousandths of a core)",
                    EXEC_MIN_CPU_MILLIS, EXEC_MAX_CPU_MILLIS);
    if (opts->test_disable_layer && exec_layer_from_name(opts->test_disable_layer) < 0)
        return fail(cmd, EXEC_EINVAL, "unknown layer %s", opts->test_disable_layer);
    cmd->launcher = find_launcher(opts->launcher);
    if ((r = add_arg(cmd, cmd->launcher ? cmd->launcher : EXEC_LAUNCHER_NAME, NULL)) < 0) return r;
    if ((r = setup_python(opts, cmd)) < 0) return r;
    snprintf(num, sizeof num, "%llu", (unsigned long long)opts->memory_bytes);
    if ((r = add_arg(cmd, "--memory", num)) < 0) return r;
    snprintf(num, sizeof num, "%llu", (unsigned long long)opts->tmp_bytes);
    if ((r = add_arg(cmd, "--tmp-size", num)) < 0) return r;
    snprintf(num, sizeof num, "%u", opts->pids_max);
    if ((r = add_arg(cmd, "--pids", num)) < 0) return r;
    snprintf(num, sizeof num, "%u", opts->cpu_millis);
    if ((r = add_arg(cmd, "--cpu-millis", num)) < 0) return r;
    if (opts->test_disable_layer && (r = add_arg(cmd, "--disable", opts->test_disable_layer)) < 0)
        return r;
    for (size_t i = 0; i < opts->n_mounts; i++)
        if (!opts->mounts || !opts->mounts[i] || (r = add_mount(cmd, opts->mounts[i])) < 0)
            return r < 0 ? r : fail(cmd, EXEC_EINVAL, "NULL mount");

    for (size_t i = 0; i < sizeof base_env / sizeof base_env[0]; i++)
        if ((r = add_env(cmd, base_env[i], NULL)) < 0) return r;
    for (size_t i = 0; i < opts->n_pass_env; i++) {
        const char *name = opts->pass_env ? opts->pass_env[i] : NULL;
        if (!valid_env_name(name))
            return fail(cmd, EXEC_EINVAL, "--pass-env %s: not a variable name (LD_* refused)",
                        name ? name : "(null)");
        const char *v = getenv(name);
        if (v && (r = add_env(cmd, name, v)) < 0) return r;
    }
    if (!cmd->launcher && !opts->unsafe_no_sandbox)
        return fail(cmd, EXEC_ENOLAUNCHER, "%s not found next to the program", EXEC_LAUNCHER_NAME);
    return 0;
}

void exec__cmd_free(struct exec__cmd *cmd)
{
    if (!cmd) return;
    for (size_t i = 0; i < cmd->n_args; i++)
        free(cmd->args[i]);
    for (size_t i = 0; i < cmd->n_env; i++)
        free(cmd->env[i]);
    free(cmd->launcher);
    free(cmd->python);
    memset(cmd, 0, sizeof *cmd);
}
