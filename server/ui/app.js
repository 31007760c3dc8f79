// idgen monitoring page: polls /admin/segments every 2 s and draws each
// tag's two segment buffers, and /admin/locks for the locks panel. Plain DOM, no framework, no build step.
// The admin token never leaves the browser except in the Authorization
// header of that request: it comes from the password field or from the
// URL fragment (#token=…, which browsers do not send), and is kept in
// sessionStorage, so it is gone when the tab closes.
'use strict';

(() => {
  const PERIOD_MS = 2000;
  const TIMEOUT_MS = 5000;
  const STORE_KEY = 'idgen.adminToken';
  // The API sits beside /ui, also behind a reverse proxy's path prefix.
  const BASE = location.pathname.replace(/\/ui(\/.*)?$/, '');
  const API = BASE + '/admin/segments';
  const LOCKS_API = BASE + '/admin/locks';

  const $ = (id) => document.getElementById(id);
  const nf = new Intl.NumberFormat();

  // ---- token ---------------------------------------------------------

  let memToken = '';

  function saveToken(t) {
    memToken = t;
    try {
      if (t) sessionStorage.setItem(STORE_KEY, t);
      else sessionStorage.removeItem(STORE_KEY);
    } catch (_) { /* storage off: keep it in memory only */ }
  }

  function loadToken() {
    try { return sessionStorage.getItem(STORE_KEY) || memToken; } catch (_) { return memToken; }
  }

  // takeFragmentToken moves #token=… into sessionStorage and removes it
  // from the address bar and history.
  function takeFragmentToken() {
    if (location.hash.length < 2) return;
    const params = new URLSearchParams(location.hash.slice(1));
    if (!params.has('token')) return;
    const t = (params.get('token') || '').trim();
    params.delete('token');
    const rest = params.toString();
    history.replaceState(history.state, '', location.pathname + location.search + (rest ? '#' + rest : ''));
    if (t) saveToken(t);
  }

  // ---- formatting ----------------------------------------------------

  function big(v) {
    if (v === null || v === undefined || v === '') return null;
    try { return BigInt(v); } catch (_) { return null; }
  }

  function fmtBig(v) { return v === null ? '–' : nf.format(v); }

  function fmtRate(r) {
    if (typeof r !== 'number' || !isFinite(r)) return '–';
    if (r === 0) return '0';
    if (r < 10) return r.toFixed(1);
    return nf.format(Math.round(r));
  }

  function fmtMs(ms) {
    if (typeof ms !== 'number' || !isFinite(ms) || ms <= 0) return '';
    if (ms < 10) return ms.toFixed(1) + ' ms';
    if (ms < 1000) return Math.round(ms) + ' ms';
    return (ms / 1000).toFixed(2) + ' s';
  }

  function fmtSpan(sec) {
    sec = Math.max(0, Math.round(sec));
    if (sec < 60) return sec + ' s';
    const m = Math.floor(sec / 60);
    if (m < 60) return m + ' min' + (m < 10 && sec % 60 ? ' ' + (sec % 60) + ' s' : '');
    const h = Math.floor(m / 60);
    if (h < 48) return h + ' h' + (m % 60 ? ' ' + (m % 60) + ' min' : '');
    return Math.floor(h / 24) + ' d';
  }

  function ago(t, now) {
    const d = (now - t) / 1000;
    if (d < 1) return 'just now';
    return fmtSpan(d) + ' ago';
  }

  function clock(t) {
    return new Date(t).toLocaleTimeString([], { hour: '2-digit', minute: '2-digit', second: '2-digit' });
  }

  function when(iso) {
    const t = iso ? Date.parse(iso) : NaN;
    return isNaN(t) ? null : t;
  }

  // ---- DOM helpers ---------------------------------------------------

  function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    return e;
  }

  function setText(e, text) {
    if (e.textContent !== text) e.textContent = text;
  }

  // nums fills a line of [prefix, bold value, suffix] pieces that wrap
  // between pieces, never inside one.
  const drawn = new WeakMap();
  function nums(box, parts) {
    const key = JSON.stringify(parts);
    if (drawn.get(box) === key) return;
    drawn.set(box, key);
    box.replaceChildren(...parts.map(([pre, val, post]) => {
      const s = el('span', '', pre);
      if (val !== undefined) s.append(el('b', '', val));
      if (post) s.append(post);
      return s;
    }));
  }

  function fact(label) {
    const box = el('div', 'fact');
    box.append(el('dt', '', label));
    const dd = el('dd');
    const main = el('span', 'v');
    const sub = el('small', 'sub');
    dd.append(main, sub);
    box.append(dd);
    return { box, main, sub };
  }

  // ---- one tag -------------------------------------------------------

  function makeBuffer(key) {
    const row = el('div', 'buf');
    const label = el('div', 'buf-label');
    const name = el('span', 'buf-name', key);
    const badge = el('span', 'chip chip-active', 'active');
    label.append(name, badge);

    const bar = el('div', 'bar');
    bar.dataset.buffer = key;
    bar.setAttribute('role', 'meter');
    bar.setAttribute('aria-valuemin', '0');
    bar.setAttribute('aria-valuemax', '100');
    bar.setAttribute('aria-label', key + ' buffer, share used');
    const fill = el('div', 'fill');
    const note = el('span', 'bar-note');
    bar.append(fill, note);

    const pct = el('div', 'pct');
    const nums = el('div', 'buf-nums');
    row.append(label, bar, pct, nums);
    return { row, badge, bar, fill, note, pct, nums };
  }

  function makeCard(tag) {
    const root = el('article', 'tag');
    root.dataset.tag = tag;
    const head = el('header', 'tag-head');
    const name = el('h3', 'tag-name', tag);
    const state = el('span', 'chip');
    head.append(name, state);

    const bufs = el('div', 'buffers');
    const current = makeBuffer('current');
    const next = makeBuffer('next');
    bufs.append(current.row, next.row);

    const facts = el('dl', 'facts');
    const step = fact('Step');
    const rate = fact('Rate');
    const load = fact('Last load');
    const runway = fact('Runway');
    facts.append(step.box, rate.box, load.box, runway.box);

    const err = el('p', 'err');
    err.hidden = true;
    root.append(head, bufs, facts, err);
    return { root, state, bufs: { current, next }, step, rate, load, runway, err };
  }

  // bufferInfo reads one buffer of the JSON into BigInts and a used share.
  function bufferInfo(b) {
    if (!b) return null;
    const start = big(b.start), end = big(b.end), pos = big(b.pos);
    if (start === null || end === null || pos === null) return null;
    const size = end - start;
    let used = pos - start;
    if (used < 0n) used = 0n;
    if (size > 0n && used > size) used = size;
    const left = size > 0n ? size - used : 0n;
    // Tenths of a percent, floored, so 99.96 % never shows as 100 %.
    const pct = size > 0n ? Number((used * 1000n) / size) / 10 : 100;
    return { start, end, pos, size, used, left, pct };
  }

  function updateBuffer(v, info, active, loading, failed) {
    v.row.classList.toggle('is-active', active);
    v.badge.hidden = !active;
    v.bar.classList.toggle('active', active);
    v.bar.classList.toggle('empty', !info);
    v.bar.classList.toggle('loading', !info && loading);
    v.bar.classList.toggle('low', !!info && active && info.pct >= 90);
    if (!info) {
      v.bar.dataset.used = '0';
      v.bar.setAttribute('aria-valuenow', '0');
      v.fill.style.width = '0%';
      setText(v.note, loading ? 'loading…' : 'not loaded');
      setText(v.pct, '');
      nums(v.nums, [[loading ? 'fetching a segment from the store'
        : failed ? 'the last load failed; it is retried with backoff'
          : 'loaded once the active segment is partly used']]);
      return;
    }
    const pct = info.pct.toFixed(1);
    v.bar.dataset.used = pct;
    v.bar.setAttribute('aria-valuenow', pct);
    v.fill.style.width = pct + '%';
    setText(v.note, active ? '' : (info.used === 0n ? 'ready' : ''));
    setText(v.pct, pct + ' %');
    nums(v.nums, [
      ['', fmtBig(info.start) + ' → ' + fmtBig(info.end)],
      ['next ', fmtBig(info.pos)],
      ['', fmtBig(info.left), ' left'],
    ]);
  }

  function updateCard(c, s, now) {
    const bufs = s.buffers || {};
    const active = s.active || 'current';
    const infos = { current: bufferInfo(bufs.current), next: bufferInfo(bufs.next) };
    const other = active === 'current' ? 'next' : 'current';
    const failed = !!s.last_error;
    updateBuffer(c.bufs.current, infos.current, active === 'current', !!s.loading && other === 'current', failed);
    updateBuffer(c.bufs.next, infos.next, active === 'next', !!s.loading && other === 'next', failed);

    const act = infos[active];
    const spare = infos[other];
    let state = 'ok', label = 'healthy';
    if (s.last_error) { state = 'bad'; label = 'load failed'; }
    else if (s.loading) { state = 'busy'; label = 'loading…'; }
    else if (act && act.pct >= 90 && !spare) { state = 'warn'; label = 'running low'; }
    else if (!act) { state = 'idle'; label = 'not loaded'; }
    c.state.className = 'chip chip-' + state;
    setText(c.state, label);
    c.root.dataset.state = state;

    // Step: the dynamic step the allocator uses vs the row's configured step.
    const step = typeof s.step === 'number' ? s.step : null;
    const row = typeof s.row_step === 'number' ? s.row_step : null;
    setText(c.step.main, step === null ? '–' : nf.format(step));
    let stepSub = row === null ? '' : 'row ' + nf.format(row);
    if (step !== null && row) {
      const k = step / row;
      if (k !== 1) stepSub += '  ·  ×' + (Number.isInteger(k) ? k : k.toFixed(2));
    }
    setText(c.step.sub, stepSub);
    c.step.box.classList.toggle('scaled', step !== null && row !== null && step !== row);

    setText(c.rate.main, fmtRate(s.rate_per_sec));
    setText(c.rate.sub, 'IDs/s');

    const t = when(s.last_load);
    setText(c.load.main, t === null ? 'never' : ago(t, now));
    const lat = fmtMs(s.last_load_latency_ms);
    setText(c.load.sub, t === null || !lat ? '' : 'took ' + lat);
    c.load.main.title = t === null ? '' : 'at ' + new Date(t).toLocaleString();

    // Runway: how long the loaded IDs last at the current rate.
    let left = 0n;
    if (act) left += act.left;
    if (spare) left += spare.left;
    const r = s.rate_per_sec;
    let short = false;
    if (typeof r === 'number' && r > 0.01 && act) {
      const secs = Number(left) / r;
      short = secs < 10;
      setText(c.runway.main, secs < 1 ? '< 1 s' : '≈ ' + fmtSpan(secs));
      setText(c.runway.sub, fmtBig(left) + ' IDs cached');
    } else {
      setText(c.runway.main, act ? 'idle' : '–');
      setText(c.runway.sub, act ? fmtBig(left) + ' IDs cached' : '');
    }
    c.runway.box.classList.toggle('warn', short);

    c.err.hidden = !s.last_error;
    setText(c.err, s.last_error ? 'Last error: ' + s.last_error : '');
  }

  // ---- snowflake -----------------------------------------------------

  function renderSnowflake(w, now) {
    const p = $('snowflake');
    p.replaceChildren();
    if (!w) {
      p.dataset.state = 'off';
      p.append(el('p', 'muted', 'Snowflake mode is off on this server.'));
      return;
    }
    p.dataset.state = w.ready ? 'ready' : 'not-ready';
    const dl = el('dl', 'facts');

    const id = fact('Worker ID');
    id.main.textContent = String(w.worker_id);
    id.sub.textContent = w.lease_expires_at ? 'leased' : 'static';

    const lease = fact('Lease expires');
    const exp = when(w.lease_expires_at);
    if (exp === null) {
      lease.main.textContent = 'no lease';
      lease.sub.textContent = 'static worker ID';
    } else {
      const left = (exp - now) / 1000;
      lease.main.textContent = left >= 0 ? 'in ' + fmtSpan(left) : 'expired';
      lease.sub.textContent = 'at ' + clock(exp);
      lease.box.classList.toggle('warn', left < 10);
      lease.box.dataset.secondsLeft = String(Math.floor(left));
    }

    const last = fact('Last timestamp');
    const lt = when(w.last_timestamp);
    last.main.textContent = lt === null ? 'none yet' : ago(lt, now);
    last.sub.textContent = lt === null ? '' : clock(lt);

    const ready = fact('State');
    ready.main.textContent = w.ready ? 'ready' : 'not ready';
    ready.main.className = 'v pill ' + (w.ready ? 'pill-ok' : 'pill-bad');
    ready.sub.textContent = w.ready ? 'issuing IDs' : 'cannot issue IDs';

    dl.append(id.box, lease.box, last.box, ready.box);
    p.append(dl);
    if (w.error) p.append(el('p', 'err', 'Error: ' + w.error));
  }

  // ---- locks ---------------------------------------------------------

  // lockPanel shows the panel's state and, for off and error, one line
  // instead of the table.
  function lockPanel(state, text) {
    const p = $('locks');
    p.dataset.state = state;
    if (text !== undefined) p.replaceChildren(el('p', state === 'error' ? 'err' : 'muted', text));
  }

  function owner(o) { return o ? o : '(hidden)'; }

  // renderLocks draws one row per lock of /admin/locks: its holder,
  // token, age (since its token was granted), TTL left, and waiters in
  // arrival order. Tokens stay strings: they may pass 2^53.
  function renderLocks(locks, now) {
    if (locks.length === 0) {
      lockPanel('idle', 'No lock is held or waited for on this instance.');
      return;
    }
    const table = el('table');
    const head = el('tr');
    for (const h of ['Lock', 'Holder', 'Token', 'Age', 'TTL left', 'Waiters']) head.append(el('th', '', h));
    table.append(el('thead'));
    table.tHead.append(head);
    const body = el('tbody');
    let waiting = 0;
    for (const l of locks) {
      const tr = el('tr');
      tr.dataset.lock = l.name;
      const h = l.holder;
      const waiters = Array.isArray(l.waiters) ? l.waiters : [];
      waiting += waiters.length;

      const holder = el('td', 'lk-holder', h ? owner(h.owner) : 'free');
      holder.dataset.field = 'holder';
      const token = el('td', 'num mono', h ? String(h.token) : '–');
      token.dataset.field = 'token';

      const age = el('td', 'num');
      age.dataset.field = 'age';
      const since = when(l.since);
      if (h && since !== null) {
        const secs = Math.max(0, (now - since) / 1000);
        age.textContent = fmtSpan(secs);
        age.dataset.seconds = String(Math.floor(secs));
        age.title = 'granted at ' + new Date(since).toLocaleString();
      } else age.textContent = '–';

      const ttl = el('td', 'num');
      ttl.dataset.field = 'ttl';
      const exp = h ? when(h.expires_at) : null;
      let state = h ? 'held' : 'free';
      if (exp !== null) {
        const left = (exp - now) / 1000;
        ttl.dataset.secondsLeft = String(Math.floor(left));
        if (left < 0) {
          state = 'lapsed';
          ttl.textContent = 'lapsed';
        } else {
          ttl.textContent = left < 1 ? '< 1 s' : fmtSpan(left);
          // A holder renews at a third of its TTL: little time left
          // means its renewals are not getting through.
          tr.classList.toggle('warn', left < 5);
        }
        ttl.title = 'expires at ' + clock(exp);
      } else ttl.textContent = '–';
      tr.dataset.state = state;

      const w = el('td');
      w.dataset.field = 'waiters';
      w.dataset.count = String(waiters.length);
      if (waiters.length === 0) w.textContent = 'none';
      else {
        const ol = el('ol', 'waiters');
        waiters.forEach((x, i) => {
          const li = el('li', '', (i + 1) + '. ' + owner(x.owner));
          const t = when(x.since);
          if (t !== null) li.append(' ', el('small', '', 'waiting ' + fmtSpan((now - t) / 1000)));
          ol.append(li);
        });
        w.append(ol);
      }

      tr.append(el('td', 'lk-name', l.name), holder, token, age, ttl, w);
      body.append(tr);
    }
    table.append(body);
    const wrap = el('div', 'locks-wrap');
    wrap.append(table);
    $('locks').replaceChildren(wrap);
    lockPanel(waiting > 0 ? 'waiting' : 'held');
  }

  // pollLocks reads /admin/locks after /admin/segments answered. Its
  // failures stay in its panel: the segment cache is still worth seeing.
  async function pollLocks(token, mine) {
    const ctl = new AbortController();
    const guard = setTimeout(() => ctl.abort(), TIMEOUT_MS);
    let r, d;
    try {
      r = await fetch(LOCKS_API, {
        headers: { Authorization: 'Bearer ' + token, Accept: 'application/json' },
        cache: 'no-store',
        credentials: 'omit',
        signal: ctl.signal,
      });
      if (r.ok) d = await r.json();
    } catch (_) {
      if (mine === seq) lockPanel('error', 'Cannot read /admin/locks; retrying every 2 s.');
      return;
    } finally {
      clearTimeout(guard);
    }
    if (mine !== seq) return;
    if (r.status === 404) {
      // locks_disabled, or a server from before the lock API.
      lockPanel('off', 'Locks are off on this server: it has no lock store.');
      return;
    }
    if (!r.ok) {
      const e = await errorBody(r);
      if (mine !== seq) return;
      lockPanel('error', '/admin/locks answered ' + r.status + (e.code ? ' ' + e.code : '') +
        (e.message ? ': ' + e.message : '') + '. Retrying every 2 s.');
      return;
    }
    // Ages and TTLs by the server's clock (its Date header, to the
    // second), as its expiries are: a browser whose clock is off would
    // show live locks lapsed.
    const srv = Date.parse(r.headers.get('Date') || '');
    const now = isNaN(srv) ? Date.now() : srv;
    renderLocks(Array.isArray(d && d.locks) ? d.locks.filter((l) => l && typeof l.name === 'string') : [], now);
  }

  // ---- page state ----------------------------------------------------

  const cards = new Map();
  let lastOK = 0;
  let lastData = null;

  function render(d) {
    const now = Date.now();
    const segs = (Array.isArray(d.segments) ? d.segments : [])
      .filter((s) => s && typeof s.tag === 'string')
      .sort((a, b) => (a.tag < b.tag ? -1 : a.tag > b.tag ? 1 : 0));
    const box = $('tags');
    const seen = new Set();
    segs.forEach((s, i) => {
      let c = cards.get(s.tag);
      if (!c) { c = makeCard(s.tag); cards.set(s.tag, c); }
      updateCard(c, s, now);
      if (box.children[i] !== c.root) box.insertBefore(c.root, box.children[i] || null);
      seen.add(s.tag);
    });
    for (const [tag, c] of cards) {
      if (!seen.has(tag)) { c.root.remove(); cards.delete(tag); }
    }
    $('seg-empty').hidden = segs.length > 0;
    renderSnowflake(d.snowflake, now);

    let rate = 0, loading = 0;
    for (const s of segs) {
      if (typeof s.rate_per_sec === 'number' && isFinite(s.rate_per_sec)) rate += s.rate_per_sec;
      if (s.loading) loading++;
    }
    setText($('sum-mode'), d.mode || '–');
    setText($('sum-tags'), String(segs.length));
    setText($('sum-rate'), fmtRate(rate) + ' IDs/s');
    setText($('sum-loading'), String(loading));
  }

  function clearData() {
    for (const c of cards.values()) c.root.remove();
    cards.clear();
    lastData = null;
    lastOK = 0;
    for (const id of ['sum-mode', 'sum-tags', 'sum-rate', 'sum-loading', 'sum-updated']) setText($(id), '–');
    $('seg-empty').hidden = true;
    const p = $('snowflake');
    p.dataset.state = 'unknown';
    p.replaceChildren(el('p', 'muted', 'No data yet.'));
    lockPanel('unknown', 'No data yet.');
  }

  function setLive(state, text) {
    $('live').dataset.state = state;
    setText($('live-text'), text);
    document.body.classList.toggle('stale', state === 'error' && lastData !== null);
  }

  function notice(kind, text) {
    const n = $('notice');
    n.dataset.kind = kind;
    setText(n, text);
    n.hidden = false;
  }

  function hideNotice() { $('notice').hidden = true; }

  function askForToken(text) {
    notice('auth', text);
    document.body.classList.add('need-token');
    const input = $('token-input');
    if (document.activeElement !== input) input.focus({ preventScroll: true });
  }

  async function errorBody(r) {
    try {
      const j = await r.json();
      return (j && j.error) || {};
    } catch (_) { return {}; }
  }

  // ---- polling -------------------------------------------------------

  let timer = 0;
  let seq = 0;

  function schedule() {
    clearTimeout(timer);
    if (!document.hidden) timer = setTimeout(poll, PERIOD_MS);
  }

  async function poll() {
    clearTimeout(timer);
    const token = loadToken();
    if (!token) {
      setLive('idle', 'waiting for a token');
      askForToken('Paste the admin token to see the segment cache (or open this page as /ui#token=…).');
      return;
    }
    const mine = ++seq;
    const ctl = new AbortController();
    const guard = setTimeout(() => ctl.abort(), TIMEOUT_MS);
    let r;
    try {
      r = await fetch(API, {
        headers: { Authorization: 'Bearer ' + token, Accept: 'application/json' },
        cache: 'no-store',
        credentials: 'omit',
        signal: ctl.signal,
      });
    } catch (e) {
      clearTimeout(guard);
      if (mine !== seq) return;
      setLive('error', 'offline');
      const why = e && e.name === 'AbortError' ? 'no answer within ' + TIMEOUT_MS / 1000 + ' s' : 'network error';
      notice('net', 'Cannot reach the server (' + why + '). Retrying every 2 s' +
        (lastOK ? '; the numbers below are from ' + ago(lastOK, Date.now()) + '.' : '.'));
      schedule();
      return;
    }
    clearTimeout(guard);
    if (mine !== seq) return;

    if (r.status === 401 || r.status === 403) {
      const e = await errorBody(r);
      if (mine !== seq) return;
      clearData();
      if (e.code === 'admin_disabled') {
        setLive('error', 'admin API off');
        notice('auth', 'The admin API is off on this server: start it with --admin-token (IDGEN_ADMIN_TOKEN), then paste the admin token here.');
      } else {
        setLive('error', r.status === 401 ? 'token missing' : 'token refused');
        askForToken(r.status === 401
          ? 'The server wants a token: paste the admin token.'
          : 'The server refused that token: paste the admin token.');
      }
      // No retry with a token known to be wrong; a new one restarts polling.
      return;
    }
    if (!r.ok) {
      const e = await errorBody(r);
      if (mine !== seq) return;
      setLive('error', 'HTTP ' + r.status);
      notice('net', 'The server answered ' + r.status + (e.code ? ' ' + e.code : '') +
        (e.message ? ': ' + e.message : '') + '. Retrying every 2 s.');
      schedule();
      return;
    }
    let d;
    try {
      d = await r.json();
    } catch (_) {
      if (mine !== seq) return;
      setLive('error', 'bad answer');
      notice('net', 'The server answered with something that is not JSON. Retrying every 2 s.');
      schedule();
      return;
    }
    if (mine !== seq) return;
    lastData = d;
    lastOK = Date.now();
    document.body.classList.remove('need-token');
    hideNotice();
    render(d);
    setLive('ok', 'live');
    setText($('sum-updated'), clock(lastOK));
    await pollLocks(token, mine);
    if (mine !== seq) return;
    schedule();
  }

  // Between polls, keep the relative times honest.
  setInterval(() => {
    if (lastOK && $('live').dataset.state !== 'ok') {
      setText($('sum-updated'), clock(lastOK) + ' (' + ago(lastOK, Date.now()) + ')');
    }
  }, 1000);

  // ---- wiring --------------------------------------------------------

  function start() {
    takeFragmentToken();
    $('token-form').addEventListener('submit', (ev) => {
      ev.preventDefault();
      const input = $('token-input');
      const t = input.value.trim();
      if (!t) { input.focus(); return; }
      saveToken(t);
      input.value = '';
      input.placeholder = 'saved in this tab';
      input.blur();
      setLive('idle', 'connecting…');
      poll();
    });
    $('token-forget').addEventListener('click', () => {
      saveToken('');
      seq++;
      clearTimeout(timer);
      clearData();
      $('token-input').placeholder = 'paste the admin token';
      poll();
    });
    window.addEventListener('hashchange', () => {
      const before = loadToken();
      takeFragmentToken();
      if (loadToken() !== before) poll();
    });
    document.addEventListener('visibilitychange', () => {
      if (document.hidden) clearTimeout(timer);
      else poll();
    });
    if (loadToken()) {
      $('token-input').placeholder = 'saved in this tab';
      setLive('idle', 'connecting…');
    }
    poll();
  }

  start();
})();
