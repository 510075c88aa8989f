/* options.h - the binary's settings: command-line flags and the config file's "ptc" object. */
#ifndef PTC_SERVER_OPTIONS_H
#define PTC_SERVER_OPTIONS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#define PTC_MAX_REPEAT 32 /* --mount / --pass-env entries */

typedef struct ptc_options {
    const char *transport;
    const char *listen;
    const char *config_file;
    const char *tools_file;
    bool check, help, version;
    const char *log_level;
    size_t max_message_bytes;
    size_t list_page_size;
    size_t output_page_chars;
    /* Run limits and files out; 0 = the executor's default (executor.h). */
    size_t max_output_bytes, memory_limit, tmp_size, max_code_bytes;
    double cpu_limit; /* cores; 0 = the executor's default */
    size_t max_file_bytes, max_call_files_bytes, max_files, file_store_bytes, max_image_bytes;
    const char *python;
    size_t max_concurrent, max_queue;
    double max_timeout;
    const char *mounts[PTC_MAX_REPEAT];
    size_t n_mounts;
    const char *pass_env[PTC_MAX_REPEAT];
    size_t n_pass_env;
    bool unsafe_no_sandbox;
    const char *embedder, *embed_model_dir, *embed_url, *embed_remote_model, *embed_key_env;
    bool expose_tools;
    const char *allow_tools, *deny_tools;
    double tool_timeout;
    double startup_wait; /* --startup-wait: first calls wait this long for the servers */
    const char *audit_log;
    bool confirm_writes;
    long max_repairs;
    double request_deadline;
    /* Workspace: live sessions, their idle lifetime, how long a call waits for a run. */
    size_t max_sessions;
    double session_idle_timeout, wait_seconds;
    const char *repair_url, *repair_model, *repair_key_env;
    const char *auth_token_env, *tls_cert, *tls_key, *ca_file;
    const char *state_key_file; /* --state-key-file: MRTR requestState key shared by instances */
    /* The sandbox's environment (environment/): --packages may be repeated and each value is
       split on commas (ptc_options_packages); --pip-find-links alone implies an offline build. */
    const char *packages[PTC_MAX_REPEAT];
    size_t n_packages;
    const char *requirements;
    double package_install_timeout;
    const char *pip_index_url, *pip_find_links;
    bool packages_optional;
    const char *custom_tools[PTC_MAX_REPEAT];
    size_t n_custom_tools;

    /* Which flags were given (by index in the flag table), to tell defaults from choices. */
    unsigned char given[96];
    /* Strings the config file contributed; freed by ptc_options_close. */
    void *config_json;
} ptc_options_t;

/** Fills the defaults. */
void ptc_options_init(ptc_options_t *o);
/** Frees what parsing the config file allocated. */
void ptc_options_close(ptc_options_t *o);
/**
 * Parses argv (borrowed: strings must outlive o). Then, if --config was given, reads the file's
 * "ptc" object for flags that the command line did not set. On error writes a message to err
 * and returns -1.
 */
int ptc_options_parse(ptc_options_t *o, int argc, char **argv, FILE *err);
/**
 * The pip requirement specifiers of every --packages value, split on commas, where a piece
 * that does not start with a letter or digit belongs to the previous spec ("numpy>=1,<2" is
 * one spec). Fills specs (malloc'd strings, at most max) and returns how many, or -1 with a
 * message in err (too many, out of memory). Free with ptc_options_packages_free.
 */
int ptc_options_packages(const ptc_options_t *o, char **specs, size_t max, FILE *err);
void ptc_options_packages_free(char **specs, size_t n);
/** Prints the --help text (the flag table). */
void ptc_options_usage(FILE *out);

#endif
