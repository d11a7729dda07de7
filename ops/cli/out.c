/*
 * out.c - see out.h.
 */
#include "ops/cli/out.h"

#include <stdlib.h>
#include <string.h>

/* cli_table_cell - a copy of s for the table; exits when memory runs out,
 * as a command that cannot print its answer has nothing left to do. */
static char *
cli_table_cell(const char *s)
{
    char *c = strdup(s ? s : "");
    if (c == NULL) {
        fputs("mayfly: out of memory\n", stderr);
        exit(1);
    }
    return c;
}

/* cli_table_init - see out.h. */
void
cli_table_init(struct cli_table *t, int ncols, const char *const *head)
{
    memset(t, 0, sizeof(*t));
    t->ncols = ncols;
    cli_table_row(t, head);
}

/* cli_table_row - see out.h. */
void
cli_table_row(struct cli_table *t, const char *const *cells)
{
    if (t->nrows == t->cap) {
        int cap = t->cap ? t->cap * 2 : 16;
        char **grown =
            realloc(t->cells, sizeof(char *) * (size_t)cap * (size_t)t->ncols);
        if (grown == NULL) {
            fputs("mayfly: out of memory\n", stderr);
            exit(1);
        }
        t->cells = grown;
        t->cap = cap;
    }
    for (int c = 0; c < t->ncols; c++)
        t->cells[t->nrows * t->ncols + c] = cli_table_cell(cells[c]);
    t->nrows++;
}

/* cli_table_print - see out.h. */
void
cli_table_print(struct cli_table *t, FILE *f)
{
    int width[CLI_TABLE_COLS] = {0};

    for (int r = 0; r < t->nrows; r++)
        for (int c = 0; c < t->ncols && c < CLI_TABLE_COLS; c++) {
            int w = (int)strlen(t->cells[r * t->ncols + c]);
            width[c] = w > width[c] ? w : width[c];
        }
    for (int r = 0; r < t->nrows; r++) {
        for (int c = 0; c < t->ncols; c++) {
            const char *s = t->cells[r * t->ncols + c];
            if (c + 1 == t->ncols)
                fprintf(f, "%s\n", s);
            else
                fprintf(f, "%-*s  ", c < CLI_TABLE_COLS ? width[c] : 0, s);
        }
    }
    cli_table_free(t);
}

/* cli_table_free - see out.h. */
void
cli_table_free(struct cli_table *t)
{
    for (int i = 0; i < t->nrows * t->ncols; i++)
        free(t->cells[i]);
    free(t->cells);
    memset(t, 0, sizeof(*t));
}

/* cli_json_text - see out.h. */
const char *
cli_json_text(struct json_object *o)
{
    return json_object_to_json_string_ext(
        o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
}

/* cli_jget - see out.h. */
struct json_object *
cli_jget(struct json_object *o, const char *key)
{
    struct json_object *v = NULL;
    if (o == NULL || !json_object_object_get_ex(o, key, &v))
        return NULL;
    return v;
}

/* cli_jstr - see out.h. */
const char *
cli_jstr(struct json_object *o, const char *key, const char *dflt)
{
    struct json_object *v = cli_jget(o, key);
    return json_object_is_type(v, json_type_string) ? json_object_get_string(v)
                                                    : dflt;
}

/* cli_jint - see out.h. */
int64_t
cli_jint(struct json_object *o, const char *key, int64_t dflt)
{
    struct json_object *v = cli_jget(o, key);
    return json_object_is_type(v, json_type_int) ? json_object_get_int64(v)
                                                 : dflt;
}

/* cli_jnum - see out.h. */
const char *
cli_jnum(struct json_object *o, const char *key)
{
    static char bufs[8][64];
    static int next;
    char *b = bufs[next++ % 8];
    struct json_object *v = cli_jget(o, key);

    if (v == NULL)
        return "";
    snprintf(b, 64, "%s",
             json_object_is_type(v, json_type_string)
                 ? json_object_get_string(v)
                 : cli_json_text(v));
    return b;
}
