/*
 * health.h - GET /health and GET /metrics (health.c).  What /health shows,
 * which the master also answers with during a drain, is
 * worker_health_view() in worker.h; http/answer_json.h writes it.
 */
#ifndef MAYFLY_WORKER_HEALTH_H
#define MAYFLY_WORKER_HEALTH_H

struct worker;
struct http_request;

/* worker_health - GET /health: this node as the master's board
 * shows it, 200 when ready, else 503. */
void worker_health(struct worker *w, struct http_request *req);

/* worker_metrics - GET /metrics: Prometheus text. */
void worker_metrics(struct worker *w, struct http_request *req);

#endif
