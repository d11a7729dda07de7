/*
 * page.js - the status page's refresh loop: every REFRESH_MS it reads
 * /health (the node and its members), the queue listing (scope=cluster once
 * the node has peers, so any node shows the whole cluster) and /metrics
 * (this node's counters, kept for HISTORY_MS and drawn as SVG charts).
 * What comes from the node is written as text, never as markup.  A failed
 * round keeps what was shown and says why; the next round tries again,
 * but for a part the node wants a token for (auth_file): the page sends
 * none, says so in that part's place, and shows the rest.
 */
'use strict';

(function () {
  const REFRESH_MS = 2000;
  const HISTORY_MS = 5 * 60 * 1000;
  const SVGNS = 'http://www.w3.org/2000/svg';
  const $ = (id) => document.getElementById(id);
  const samples = []; /* {t, push, pop, ack, mem}: t in ms, counters as read */

  /* getJSON - the parsed answer to path, what it is named in errors;
   * /health's 503 (starting, draining, stale) is an answer too. */
  async function getJSON(path, what) {
    const r = await fetch(path, { cache: 'no-store' });
    let body = null;
    try {
      body = await r.json();
    } catch (e) {
      throw new Error(what + ' answered ' + r.status + ' without JSON');
    }
    if (!r.ok && !(r.status === 503 && body && body.members))
      throw refusal(what + ': ' + (body && body.error ? body.error : 'HTTP ' + r.status), r.status);
    return body;
  }

  /* refusal - an Error that keeps the status it was answered with. */
  function refusal(message, status) {
    const e = new Error(message);
    e.status = status;
    return e;
  }

  /* wantsToken - a 401 or 403: the node has tokens on (auth_file), and the
   * page, which sends none, will be refused the same way every round. */
  const wantsToken = (e) => e.status === 401 || e.status === 403;

  /* getMetrics - /metrics as a Map from "name{labels}" to value. */
  async function getMetrics() {
    const r = await fetch('/metrics', { cache: 'no-store' });
    if (!r.ok)
      throw refusal('metrics: HTTP ' + r.status, r.status);
    const m = new Map();
    for (const line of (await r.text()).split('\n')) {
      if (line === '' || line[0] === '#')
        continue;
      const sp = line.lastIndexOf(' ');
      m.set(line.slice(0, sp), Number(line.slice(sp + 1)));
    }
    return m;
  }

  /* el - a new element with text (and a class). */
  function el(tag, text, cls) {
    const e = document.createElement(tag);
    if (text !== undefined)
      e.textContent = String(text);
    if (cls)
      e.className = cls;
    return e;
  }

  function fmtInt(n) {
    return Number.isFinite(n) ? Math.round(n).toLocaleString('en-US') : '–';
  }

  function fmtBytes(n) {
    if (!Number.isFinite(n))
      return '–';
    const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
    let i = 0;
    while (n >= 1024 && i < units.length - 1) {
      n /= 1024;
      i++;
    }
    return (i === 0 ? String(n) : n.toFixed(n < 10 ? 1 : 0)) + ' ' + units[i];
  }

  function fmtRate(n) {
    return n >= 100 ? fmtInt(n) : n >= 10 ? n.toFixed(0) : n.toFixed(1);
  }

  /* showHealth - the header and the member table. */
  function showHealth(h) {
    $('node').textContent = h.node;
    const st = $('status');
    st.textContent = h.status;
    st.className = 'pill ' + h.status;
    document.title = 'mayfly · ' + h.node;
    const rows = h.members.map((m) => {
      const tr = el('tr');
      tr.dataset.member = m.node;
      tr.dataset.state = m.state;
      if (m.self)
        tr.className = 'self';
      const role = m.self ? h.role
        : m.state !== 'live' ? '–'
        : m.node === h.leader ? 'leader' : 'follower';
      tr.append(el('td', m.node), el('td', m.state, m.state), el('td', role, role));
      return tr;
    });
    $('members').replaceChildren(...rows);
    const live = h.members.filter((m) => m.state === 'live').length;
    $('member-count').textContent = live + ' of ' + h.members.length + ' live';
  }

  /* presence - "N members in M channels": the presence channels this
   * node owns (a channel lives on its owner, so in a cluster each node
   * shows its own share). */
  function presence(members, channels) {
    if (!Number.isFinite(members) || !Number.isFinite(channels))
      return '–';
    return fmtInt(members) + (members === 1 ? ' member in ' : ' members in ') +
      fmtInt(channels) + (channels === 1 ? ' channel' : ' channels');
  }

  /* showSummary - this node's figures from /health and /metrics. */
  function showSummary(h, m) {
    const get = (k) => m.get(k);
    const rows = [
      ['role', h.role + ' (term ' + h.term + ')'],
      ['leader', h.leader === null ? 'none' : h.leader],
      ['incarnation', h.incarnation],
      ['memory', fmtBytes(get('mayfly_memory_used_bytes')) + ' of ' +
        fmtBytes(get('mayfly_memory_limit_bytes'))],
      ['messages', fmtInt(get('mayfly_messages{state="pending"}')) + ' pending, ' +
        fmtInt(get('mayfly_messages{state="leased"}')) + ' leased'],
      ['parked pops', fmtInt(get('mayfly_parked_pops'))],
      ['open streams', fmtInt(get('mayfly_streams'))],
      ['presence', presence(get('mayfly_presence_members'), get('mayfly_presence_channels'))],
      ['queues', fmtInt(get('mayfly_queues{kind="implicit"}')) + ' implicit, ' +
        fmtInt(get('mayfly_queues{kind="declared"}')) + ' declared'],
      ['oldest message', get('mayfly_oldest_message_age_seconds') > 0
        ? get('mayfly_oldest_message_age_seconds').toFixed(1) + ' s' : '–'],
    ];
    if (m.size === 0) /* /metrics wants a token: what /health gives */
      rows.splice(3, rows.length, ['figures', '/metrics wants a token (metrics_auth)']);
    const out = [];
    for (const [k, v] of rows)
      out.push(el('dt', k), el('dd', v));
    $('summary').replaceChildren(...out);
  }

  /* showQueues - one row a queue, in the listing's order (by name). */
  function showQueues(list) {
    let total = 0;
    const rows = list.queues.map((q) => {
      const tr = el('tr');
      tr.dataset.queue = q.queue;
      tr.dataset.depth = q.depth;
      total += q.depth;
      const td = el('td', q.queue);
      td.title = q.queue;
      tr.append(td, el('td', q.tier),
        el('td', fmtInt(q.depth), 'n'), el('td', fmtInt(q.leased), 'n'),
        el('td', fmtInt(q.waiting), 'n'), el('td', fmtBytes(q.bytes), 'n'),
        el('td', fmtInt(q.drops.bounds), 'n'), el('td', fmtInt(q.drops.ttl), 'n'),
        el('td', fmtInt(q.drops.retry), 'n'),
        el('td', fmtInt(q.partitions), 'n'), el('td', fmtInt(q.groups), 'n'));
      return tr;
    });
    $('queues').replaceChildren(...rows);
    $('queue-count').textContent = fmtInt(list.count) + (list.count === 1 ? ' queue, ' : ' queues, ') +
      fmtInt(total) + ' messages' + (list.scope === 'cluster' ? ' in the cluster' : ' on this node');
    const notes = [];
    if (list.truncated)
      notes.push('The first ' + list.queues.length + ' by name; a prefix narrows the list.');
    if (list.missing && list.missing.length)
      notes.push('Not counted (did not answer): ' + list.missing.join(', ') + '.');
    $('queues-note').textContent = notes.join(' ');
  }

  /* rates - messages a second between consecutive samples; null across a
   * counter that went back (the node restarted). */
  function rates(key) {
    const out = [];
    for (let i = 1; i < samples.length; i++) {
      const a = samples[i - 1], b = samples[i];
      const d = b[key] - a[key], dt = (b.t - a.t) / 1000;
      out.push({ t: b.t, v: d >= 0 && dt > 0 ? d / dt : null });
    }
    return out;
  }

  /* niceMax - a round top for the y axis, at least min. */
  function niceMax(v, min) {
    v = Math.max(v, min);
    const p = Math.pow(10, Math.floor(Math.log10(v)));
    for (const k of [1, 2, 2.5, 5, 10])
      if (k * p >= v)
        return k * p;
    return 10 * p;
  }

  /* niceBytes - niceMax in the binary unit the value is counted in, so
   * the axis reads 100 KiB, not 98 KiB. */
  function niceBytes(v, min) {
    const unit = Math.pow(1024, Math.max(0, Math.floor(Math.log(Math.max(v, min)) / Math.log(1024))));
    return niceMax(v / unit, min / unit) * unit;
  }

  function svg(tag, attrs, text) {
    const e = document.createElementNS(SVGNS, tag);
    for (const k in attrs)
      e.setAttribute(k, attrs[k]);
    if (text !== undefined)
      e.textContent = text;
    return e;
  }

  /* drawChart - series ({cls, points: [{t, v}]}) over the last HISTORY_MS,
   * y from 0 to topOf(the largest v), labelled by fmt; a null v breaks a
   * line. */
  function drawChart(node, series, fmt, topOf) {
    const w = Math.max(node.clientWidth, 200), h = Math.max(node.clientHeight, 100);
    const left = 56, right = 6, top = 8, bottom = 18;
    const now = performance.now();
    let max = 0;
    for (const s of series)
      for (const p of s.points)
        if (p.v !== null)
          max = Math.max(max, p.v);
    const ymax = topOf(max);
    const x = (t) => left + (w - left - right) * (1 - (now - t) / HISTORY_MS);
    const y = (v) => top + (h - top - bottom) * (1 - v / ymax);
    const parts = [];
    for (const f of [0, 0.5, 1]) {
      parts.push(svg('line', { class: 'grid', x1: left, x2: w - right, y1: y(ymax * f), y2: y(ymax * f) }));
      parts.push(svg('text', { x: left - 6, y: y(ymax * f) + 4, 'text-anchor': 'end' }, fmt(ymax * f)));
    }
    parts.push(svg('text', { x: left, y: h - 4 }, '−5 min'));
    parts.push(svg('text', { x: w - right, y: h - 4, 'text-anchor': 'end' }, 'now'));
    for (const s of series) {
      let d = '', pen = 'M';
      for (const p of s.points) {
        if (p.v === null) {
          pen = 'M';
          continue;
        }
        d += pen + x(p.t).toFixed(1) + ' ' + y(p.v).toFixed(1);
        pen = 'L';
      }
      if (d !== '')
        parts.push(svg('path', { class: s.cls, d: d }));
    }
    node.setAttribute('viewBox', '0 0 ' + w + ' ' + h);
    node.replaceChildren(...parts);
  }

  /* record - keep this round's counters, drop what is past the window. */
  function record(m) {
    const t = performance.now();
    samples.push({
      t: t,
      push: m.get('mayfly_push_total{result="accepted"}'),
      pop: m.get('mayfly_pop_total'),
      ack: m.get('mayfly_ack_total{outcome="acked"}'),
      mem: m.get('mayfly_memory_used_bytes'),
    });
    while (samples.length > 0 && samples[0].t < t - HISTORY_MS)
      samples.shift();
  }

  function showCharts(m) {
    drawChart($('rates'), [
      { cls: 's-push', points: rates('push') },
      { cls: 's-pop', points: rates('pop') },
      { cls: 's-ack', points: rates('ack') },
    ], fmtRate, (v) => niceMax(v, 1));
    drawChart($('memory'), [
      { cls: 's-mem', points: samples.map((s) => ({ t: s.t, v: s.mem })) },
    ], fmtBytes, (v) => niceBytes(v, 1024));
    $('memory-limit').textContent = 'limit ' + fmtBytes(m.get('mayfly_memory_limit_bytes'));
  }

  /* What wanted a token (wantsToken): not asked again, so the page does
   * not retry a refusal that cannot change while the node runs; a reload
   * asks again. */
  const locked = { listing: false, metrics: false };

  /* showLocked - in the queues' place (or the metrics'), that the node
   * wants a token the page does not send. */
  function showLocked() {
    if (locked.listing) {
      /* no filter and no empty table: the note alone */
      $('prefix').closest('label').style.display = 'none';
      $('queues').closest('.scroll').style.display = 'none';
      $('queues').replaceChildren();
      $('queue-count').textContent = 'not shown';
      $('queues-note').textContent = 'This node has tokens on (auth_file): the queue listing ' +
        'wants a token, and this page sends none, so the queues are not shown here. ' +
        'Use the listing with a token (Authorization: Bearer <token>).';
    }
    if (locked.metrics) {
      $('memory-limit').textContent = '';
      for (const id of ['rates', 'memory'])
        $(id).replaceChildren(svg('text', { x: 8, y: 24 }, '/metrics wants a token: no chart'));
    }
  }

  /* refresh - one round: health first (it says whether to ask the
   * cluster), then the listing and the metrics together, each shown as it
   * comes.  A node that answers /health but not the rest (stale,
   * draining) shows its status and the reason; one that wants a token
   * for the listing or /metrics shows what it can and says so in their
   * place, without asking for them again. */
  async function refresh() {
    let h = null;
    try {
      h = await getJSON('/health', 'health');
      showHealth(h);
      const peers = h.members.length > 1;
      const prefix = $('prefix').value;
      const q = '/api/v1/ephemeral/queues?limit=1000' + (peers ? '&scope=cluster' : '') +
        (prefix ? '&prefix=' + encodeURIComponent(prefix) : '');
      const [list, m] = await Promise.allSettled([
        locked.listing ? null : getJSON(q, 'the queue listing'),
        locked.metrics ? null : getMetrics(),
      ]);
      for (const [r, k] of [[list, 'listing'], [m, 'metrics']])
        if (r.status === 'rejected' && wantsToken(r.reason))
          locked[k] = true;
      const failed = [list, m].find((r) => r.status === 'rejected' && !wantsToken(r.reason));
      if (m.status === 'fulfilled' && m.value !== null) {
        record(m.value);
        showSummary(h, m.value);
        showCharts(m.value);
      } else if (locked.metrics) {
        showSummary(h, new Map());
      }
      if (list.status === 'fulfilled' && list.value !== null)
        showQueues(list.value);
      showLocked();
      if (failed)
        throw failed.reason;
      $('error').hidden = true;
      $('updated').textContent = 'updated ' + new Date().toLocaleTimeString();
      document.body.dataset.state = 'ready';
    } catch (e) {
      $('error').textContent = (h ? 'The node answers, but ' : 'Cannot reach the node: ') +
        e.message + '. Retrying.';
      $('error').hidden = false;
      if (h === null) {
        $('status').textContent = 'unreachable';
        $('status').className = 'pill down';
      }
    }
    setTimeout(refresh, REFRESH_MS);
  }

  refresh();
})();
