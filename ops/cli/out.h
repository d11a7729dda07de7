/*
 * out.h - what the command prints: aligned tables for people, JSON text
 * for payloads, and the readers that pull fields out of an answer.
 */
#ifndef MAYFLY_CLI_OUT_H
#define MAYFLY_CLI_OUT_H

#include <stdint.h>
#include <stdio.h>

#include <json-c/json.h>

#define CLI_TABLE_COLS 12

/* A table of strings: a header row, then rows, printed column-aligned. */
struct cli_table {
    int ncols;
    int nrows; /* the header included */
    int cap;
    char **cells; /* nrows * ncols, each malloc'ed */
};

/* cli_table_init - a table with the ncols headings in head. */
void cli_table_init(struct cli_table *t, int ncols, const char *const *head);

/* cli_table_row - append a row of t->ncols strings (NULL prints as ""). */
void cli_table_row(struct cli_table *t, const char *const *cells);

/* cli_table_print - print t to f, each column as wide as its widest cell
 * (the last one unpadded), and free it. */
void cli_table_print(struct cli_table *t, FILE *f);

/* cli_table_free - release t's cells. */
void cli_table_free(struct cli_table *t);

/* cli_json_text - o as compact JSON ("null" for NULL), valid until o is
 * freed or printed again. */
const char *cli_json_text(struct json_object *o);

/* cli_jget - member key of object o, or NULL. */
struct json_object *cli_jget(struct json_object *o, const char *key);

/* cli_jstr - the string member key of o, or dflt when absent or not one. */
const char *cli_jstr(struct json_object *o, const char *key, const char *dflt);

/* cli_jint - the integer member key of o, or dflt when absent or not one. */
int64_t cli_jint(struct json_object *o, const char *key, int64_t dflt);

/* cli_jnum - the member key of o printed as text ("" when absent), in a
 * rotating static buffer that holds the last 8 results. */
const char *cli_jnum(struct json_object *o, const char *key);

#endif
