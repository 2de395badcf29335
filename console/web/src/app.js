// tide's web console: Preact + htm, uPlot for the utilisation chart.
// Built with esbuild into ../assets/app.js (npm run build).
import { h, render } from 'preact';
import { useState, useEffect, useRef, useCallback } from 'preact/hooks';
import htm from 'htm';
import uPlot from 'uplot';

const html = htm.bind(h);
const TOKEN = 'tide.token';

// ---- API -------------------------------------------------------------

class AuthError extends Error {}

function token() { return sessionStorage.getItem(TOKEN) || ''; }

async function api(path, opts = {}) {
  const headers = { Authorization: 'Bearer ' + token() };
  if (opts.body) headers['Content-Type'] = 'application/json';
  const r = await fetch('/ui/api/' + path, { method: opts.method || 'GET', headers, body: opts.body, cache: 'no-store' });
  let data = null;
  try { data = await r.json(); } catch (e) { /* not JSON */ }
  if (r.status === 401) throw new AuthError((data && data.error) || 'sign in again');
  if (!r.ok) throw new Error((data && data.error) || r.status + ' ' + r.statusText);
  return data;
}

// stream reads the server-sent events of /ui/api/stream with fetch (so the
// token travels in a header, never in the URL) and calls onUpdate per event;
// it reconnects after an error. It returns a function that stops it.
function stream(onUpdate, onState) {
  let stopped = false, ctrl = null;
  (async () => {
    let delay = 1000;
    while (!stopped) {
      try {
        ctrl = new AbortController();
        const r = await fetch('/ui/api/stream', { headers: { Authorization: 'Bearer ' + token() }, signal: ctrl.signal, cache: 'no-store' });
        if (!r.ok) throw new Error('stream: ' + r.status);
        onState('live');
        delay = 1000;
        const reader = r.body.getReader();
        const dec = new TextDecoder();
        let buf = '';
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          buf += dec.decode(value, { stream: true });
          let i;
          while ((i = buf.indexOf('\n\n')) >= 0) {
            const block = buf.slice(0, i); buf = buf.slice(i + 2);
            const data = block.split('\n').filter(l => l.startsWith('data:')).map(l => l.slice(5).trim()).join('\n');
            if (data) { try { onUpdate(JSON.parse(data)); } catch (e) { /* ignore */ } }
          }
        }
      } catch (e) { if (stopped) return; }
      onState('reconnecting');
      await new Promise(res => setTimeout(res, delay));
      delay = Math.min(delay * 2, 15000);
    }
  })();
  return () => { stopped = true; if (ctrl) ctrl.abort(); };
}

// ---- formatting ------------------------------------------------------

const fmtTime = t => {
  if (!t) return '—';
  const d = new Date(t);
  const now = new Date();
  const same = d.toDateString() === now.toDateString();
  return same ? d.toLocaleTimeString([], { hour: '2-digit', minute: '2-digit', second: '2-digit' })
    : d.toLocaleString([], { month: 'short', day: 'numeric', hour: '2-digit', minute: '2-digit' });
};
function fmtDur(s) {
  if (s == null || s < 0) return '—';
  if (s < 60) return Math.round(s) + ' s';
  if (s < 3600) return Math.round(s / 60) + ' min';
  if (s < 86400) return (s / 3600).toFixed(1) + ' h';
  return (s / 86400).toFixed(1) + ' d';
}
// fmtIn says how far ahead t is: 'in 5 min', or 'now' when it is due or
// past (a running job over its estimate, a server clock ahead of this one).
function fmtIn(t) {
  if (!t) return '—';
  const s = (new Date(t) - Date.now()) / 1000;
  return s < 1 ? 'now' : 'in ' + fmtDur(s);
}
const pct = x => Math.round(100 * x) + '%';
const num = (x, d = 1) => x == null ? '—' : Number(x).toFixed(x !== 0 && Math.abs(x) < 1 ? Math.max(d, 3) : d);

// Okabe & Ito's colour-blind-safe palette (black left out: it marks down
// GPUs); a name always gets the same colour, and every cell also says its
// holder in its label, so colour is never the only cue.
const PALETTE = ['#E69F00', '#56B4E9', '#009E73', '#F0E442', '#0072B2', '#D55E00', '#CC79A7'];
function colour(name) {
  let x = 0;
  for (let i = 0; i < name.length; i++) x = (x * 31 + name.charCodeAt(i)) >>> 0;
  return PALETTE[x % PALETTE.length];
}

const RISK = {
  late: ['✖ late', 'risk-late'], tight: ['▲ tight', 'risk-tight'], ok: ['✔ on time', 'risk-ok'],
  missed: ['✖ missed', 'risk-late'], unknown: ['? unknown', 'risk-tight'],
};
const Risk = ({ r }) => r ? html`<span class="badge ${RISK[r][1]}">${RISK[r][0]}</span>` : html`<span class="muted">—</span>`;
const State = ({ s }) => html`<span class="state st-${s}">${s}</span>`;

// ---- routing ---------------------------------------------------------

const VIEWS = [['cluster', 'Cluster'], ['queue', 'Queue'], ['tenants', 'Tenants'], ['usage', 'Utilisation'], ['whatif', 'What-if']];

function route() {
  const h = location.hash.replace(/^#\/?/, '');
  const [view, ...rest] = h.split('/');
  if (view === 'job' && rest.length) return { view: 'job', id: decodeURIComponent(rest.join('/')) };
  return { view: VIEWS.some(v => v[0] === view) ? view : 'cluster' };
}
const go = path => { location.hash = '#/' + path; };

// ---- app -------------------------------------------------------------

function App() {
  const [me, setMe] = useState(null);
  const [checking, setChecking] = useState(!!token());
  const [r, setRoute] = useState(route());
  const [tick, setTick] = useState(0);
  const [live, setLive] = useState('connecting');
  const [summary, setSummary] = useState(null);

  useEffect(() => {
    const on = () => setRoute(route());
    addEventListener('hashchange', on);
    return () => removeEventListener('hashchange', on);
  }, []);
  useEffect(() => {
    if (!token()) return;
    api('login', { method: 'POST' }).then(setMe).catch(() => sessionStorage.removeItem(TOKEN)).finally(() => setChecking(false));
  }, []);
  useEffect(() => {
    if (!me) return;
    let timer = null, stop = null;
    const start = () => {
      if (stop) return;
      stop = stream(() => {
        if (timer) return;
        timer = setTimeout(() => { timer = null; setTick(t => t + 1); }, 250);
      }, setLive);
    };
    const halt = () => { if (stop) { stop(); stop = null; setLive('paused'); } };
    // A hidden tab, or a page left for another (kept in the back/forward
    // cache), gives its stream's connection back: over HTTP/1.1 a browser
    // opens six at most to a server, and each open stream holds one, so
    // a few forgotten tabs would stall every request of the next. Back
    // in view, it reconnects and fetches what changed meanwhile.
    const back = () => { if (!stop) { start(); setTick(t => t + 1); } };
    const vis = () => (document.hidden ? halt() : back());
    const show = e => { if (e.persisted) back(); };
    start();
    addEventListener('visibilitychange', vis);
    addEventListener('pagehide', halt);
    addEventListener('pageshow', show);
    return () => {
      halt(); clearTimeout(timer);
      removeEventListener('visibilitychange', vis);
      removeEventListener('pagehide', halt);
      removeEventListener('pageshow', show);
    };
  }, [me]);
  useEffect(() => {
    if (me) api('summary').then(setSummary).catch(onErr);
  }, [me, tick]);
  const onErr = useCallback(e => { if (e instanceof AuthError) { sessionStorage.removeItem(TOKEN); setMe(null); } }, []);
  // Keyboard: g then c/q/t/u/w switches view.
  useEffect(() => {
    let g = false;
    const key = e => {
      if (e.target.closest('input,select,textarea') || e.ctrlKey || e.metaKey || e.altKey) return;
      if (g) {
        const v = { c: 'cluster', q: 'queue', t: 'tenants', u: 'usage', w: 'whatif' }[e.key];
        g = false;
        if (v) { go(v); e.preventDefault(); }
      } else if (e.key === 'g') g = true;
    };
    addEventListener('keydown', key);
    return () => removeEventListener('keydown', key);
  }, []);

  if (checking) return html`<main class="login"><p>Signing in…</p></main>`;
  if (!me) return html`<${Login} onDone=${setMe} />`;
  const signOut = () => { sessionStorage.removeItem(TOKEN); setMe(null); };
  const props = { me, tick, onErr, summary };
  let body;
  switch (r.view) {
    case 'queue': body = html`<${Queue} ...${props} />`; break;
    case 'job': body = html`<${JobView} ...${props} id=${r.id} />`; break;
    case 'tenants': body = html`<${Tenants} ...${props} />`; break;
    case 'usage': body = html`<${UsageView} ...${props} />`; break;
    case 'whatif': body = html`<${WhatIfView} ...${props} />`; break;
    default: body = html`<${Cluster} ...${props} />`;
  }
  return html`
    <a class="skip" href="#main" onClick=${e => { e.preventDefault(); document.getElementById('main').focus(); }}>Skip to content</a>
    <header>
      <div class="brand"><strong>tide</strong> <span class="muted">${me.kind || ''}${summary ? ' · ' + summary.policy : ''}</span></div>
      <nav aria-label="Views">
        ${VIEWS.map(([v, label]) => html`<a href="#/${v}" aria-current=${r.view === v ? 'page' : null}>${label}</a>`)}
      </nav>
      <div class="who">
        <span class="live live-${live}" role="status" title="Updates are pushed by the server">${live === 'live' ? '● live' : '○ ' + live}</span>
        <span>${me.admin ? 'admin' : me.tenant}</span>
        <button onClick=${signOut}>Sign out</button>
      </div>
    </header>
    <main id="main" tabindex="-1">${body}</main>`;
}

function Login({ onDone }) {
  const [err, setErr] = useState('');
  const [busy, setBusy] = useState(false);
  const submit = async e => {
    e.preventDefault();
    const tok = e.target.token.value.trim();
    if (!tok) { setErr('Enter your API token.'); return; }
    setBusy(true); setErr('');
    sessionStorage.setItem(TOKEN, tok);
    try { onDone(await api('login', { method: 'POST' })); } catch (x) {
      sessionStorage.removeItem(TOKEN);
      setErr(x instanceof AuthError ? 'That token is not known here.' : String(x.message || x));
    } finally { setBusy(false); }
  };
  return html`<main class="login">
    <form method="post" onSubmit=${submit} aria-describedby="login-help">
      <h1>tide</h1>
      <label for="token">API token</label>
      <input id="token" name="token" type="password" autocomplete="current-password" autofocus required />
      <p id="login-help" class="muted">The token of your tenant (<code>tide tenant add</code>) or the admin's. It is kept in this tab only and sent in a header, never in a URL.</p>
      ${err && html`<p class="error" role="alert">${err}</p>`}
      <button type="submit" disabled=${busy}>Sign in</button>
    </form></main>`;
}

// FIRST_VIEW is the performance mark set once the first view's data is on
// screen (the frame after it rendered has begun): the render-time
// benchmark (BenchmarkConsoleBrowser) reads it.
const FIRST_VIEW = 'tide:first-view';
let firstViewMarked = false;

// useData fetches path again whenever deps change (and on every live update).
function useData(path, deps, onErr) {
  const [data, setData] = useState(null);
  const [err, setErr] = useState('');
  useEffect(() => {
    if (!data || firstViewMarked) return;
    firstViewMarked = true;
    requestAnimationFrame(() => requestAnimationFrame(() => performance.mark(FIRST_VIEW)));
  }, [data]);
  useEffect(() => {
    if (!path) return;
    let live = true;
    api(path).then(d => { if (live) { setData(d); setErr(''); } }).catch(e => { if (live) { setErr(String(e.message || e)); onErr(e); } });
    return () => { live = false; };
  }, deps);
  return [data, err];
}

function Cards({ s }) {
  if (!s) return null;
  const items = [
    ['GPUs', s.gpus], ['allocated', s.allocated], ['useful', s.useful], ['down or taken back', s.down],
    ['running', s.running], ['waiting', s.waiting], ['at risk', s.at_risk],
  ];
  return html`<dl class="cards">${items.map(([k, v]) => html`<div><dt>${k}</dt><dd>${v}</dd></div>`)}</dl>`;
}

// Pager pages a list; it stands above the list too (top), so that a
// keyboard reaches it without going through the page's hundreds of links.
// A page left empty (the list shrank under it) gives way to the last one.
function Pager({ total, offset, limit, onPage, what, top }) {
  useEffect(() => {
    if (offset > 0 && offset >= total) onPage(Math.max(0, Math.floor((total - 1) / limit) * limit));
  }, [total, offset]);
  if (total <= limit) return top ? null : html`<p class="muted">${total} ${what}</p>`;
  return html`<div class="pager" role="navigation" aria-label=${'Pages of ' + what + (top ? ' (top)' : '')}>
    <button disabled=${offset === 0} onClick=${() => onPage(Math.max(0, offset - limit))}>← Previous</button>
    <span>${offset + 1}–${Math.min(total, offset + limit)} of ${total} ${what}</span>
    <button disabled=${offset + limit >= total} onClick=${() => onPage(offset + limit)}>Next →</button>
  </div>`;
}

// ---- cluster ---------------------------------------------------------

function Cluster({ tick, onErr }) {
  const [by, setBy] = useState('tenant');
  const [site, setSite] = useState('');
  const [type, setType] = useState('');
  const [offset, setOffset] = useState(0);
  const limit = 100;
  const q = `cluster?offset=${offset}&limit=${limit}&site=${encodeURIComponent(site)}&type=${encodeURIComponent(type)}`;
  const [d, err] = useData(q, [q, tick], onErr);
  if (err) return html`<p class="error" role="alert">${err}</p>`;
  if (!d) return html`<p>Loading…</p>`;
  const s = d.summary;
  const names = new Set();
  for (const n of d.nodes) for (const g of n.gpus) if (g.tenant) names.add(by === 'job' && g.job ? g.job : g.tenant);
  return html`
    <h1>Cluster</h1>
    <${Cards} s=${s} />
    <div class="controls">
      <label>Colour by <select value=${by} onChange=${e => setBy(e.target.value)}><option value="tenant">tenant</option><option value="job">job</option></select></label>
      <label>Site <select value=${site} onChange=${e => { setSite(e.target.value); setOffset(0); }}><option value="">all</option>${s.sites.map(x => html`<option>${x}</option>`)}</select></label>
      <label>GPU type <select value=${type} onChange=${e => { setType(e.target.value); setOffset(0); }}><option value="">all</option>${s.gpu_types.map(x => html`<option>${x}</option>`)}</select></label>
    </div>
    <ul class="legend" aria-label="Legend">
      <li><span class="cell free"></span> free</li>
      <li><span class="cell down">✕</span> down (failed, cordoned, NotReady)</li>
      <li><span class="cell taken">↩</span> taken back (held outside tide's scheduling)</li>
      ${[...names].sort().slice(0, 24).map(n => html`<li><span class="cell" style=${'background:' + (n === '(other tenant)' ? '' : colour(n))} data-other=${n === '(other tenant)'}></span> ${n}</li>`)}
    </ul>
    <${Pager} total=${d.total} offset=${offset} limit=${limit} onPage=${setOffset} what="nodes" top />
    <div class="nodes">
      ${(() => {
        // One tab stop per job (its first GPU here), not one per GPU: a
        // page holds up to 800 cells. The others are links for the mouse.
        const stop = new Set();
        return d.nodes.map(n => {
          // A long name (site/rack/node) would be cut to the part nodes
          // share: the heading is its last part, the rest goes below.
          const cut = n.name.lastIndexOf('/');
          return html`<section class="node" aria-label=${'node ' + n.name}>
          <h2 title=${n.name}>${n.name.slice(cut + 1)}</h2>
          <p class="muted" title=${n.name}>${n.gpu_type} · ${n.site}${n.site_kind !== 'cloud' ? ' (' + n.site_kind + ')' : ''}${cut > 0 ? ' · ' + n.name.slice(0, cut) : ''}</p>
          <div class="gpus">${n.gpus.map(g => {
            const who = by === 'job' && g.job ? g.job : g.tenant;
            const label = `${n.name} ${g.label}: ${g.down || g.reclaimed ? (g.down ? 'down' : 'taken back') + (g.why ? ' (' + g.why + ')' : '') : g.job ? 'job ' + g.job + ' (' + g.tenant + ')' : g.tenant ? g.tenant : 'free'}`;
            if (g.down) return html`<span class="cell down" role="img" aria-label=${label} title=${label}>✕</span>`;
            if (g.reclaimed) return html`<span class="cell taken" role="img" aria-label=${label} title=${label}>↩</span>`;
            if (g.job) {
              const first = !stop.has(g.job);
              stop.add(g.job);
              return html`<a class="cell" href=${'#/job/' + encodeURIComponent(g.job)} tabindex=${first ? null : -1} style=${'background:' + colour(who)} aria-label=${label} title=${label}></a>`;
            }
            if (g.tenant) return html`<span class="cell" data-other="true" role="img" aria-label=${label} title=${label}></span>`;
            return html`<span class="cell free" role="img" aria-label=${label} title=${label}></span>`;
          })}</div>
        </section>`;
        });
      })()}
    </div>
    <${Pager} total=${d.total} offset=${offset} limit=${limit} onPage=${setOffset} what="nodes" />`;
}

// ---- queue -----------------------------------------------------------

// ORDER says where the queue's positions come from (QueuePage.position_by).
const ORDER = {
  policy: "Order: the policy's order this round (jobs it has not ordered yet come last).",
  submission: 'Order: submission (the policy gives no order).',
  none: 'No job waits.',
};

function Queue({ me, tick, onErr }) {
  const [state, setState] = useState('active');
  const [text, setText] = useState('');
  const [offset, setOffset] = useState(0);
  const [msg, setMsg] = useState('');
  const limit = 100;
  const q = `queue?state=${state}&offset=${offset}&limit=${limit}&q=${encodeURIComponent(text)}`;
  const [d, err] = useData(q, [q, tick], onErr);
  return html`
    <h1>Queue</h1>
    <div class="controls">
      <label>Show <select value=${state} onChange=${e => { setState(e.target.value); setOffset(0); }}>
        ${['active', 'waiting', 'running', 'held', 'ended', 'all'].map(x => html`<option>${x}</option>`)}</select></label>
      <label>Find <input type="search" value=${text} placeholder="job, name or tenant" onInput=${e => { setText(e.target.value); setOffset(0); }} /></label>
    </div>
    ${msg && html`<p class="note" role="status">${msg}</p>`}
    ${err && html`<p class="error" role="alert">${err}</p>`}
    ${d && html`
      <p class="muted order">${ORDER[d.position_by] || ''} Starts are the policy's predictions, or marked * when forecast by replaying the queue in the simulator; finishes add the estimated run time left.</p>
      <${Pager} total=${d.total} offset=${offset} limit=${limit} onPage=${setOffset} what="jobs" top />
      <div class="table-wrap"><table class="queue">
        <thead><tr><th scope="col">#</th><th scope="col">Job</th><th scope="col">Tenant</th><th scope="col">State</th><th scope="col">GPUs</th>
        <th scope="col">Reason</th><th scope="col">Start</th><th scope="col">Finish</th><th scope="col">Deadline</th><th scope="col">Risk</th><th scope="col"><span class="sr">Actions</span></th></tr></thead>
        <tbody>${d.jobs.map(j => html`<tr id=${"row-" + j.id}>
          <td>${j.position || (j.state === 'running' ? '▶' : '')}</td>
          <td><a href=${'#/job/' + encodeURIComponent(j.id)}>${j.id}</a>${j.name ? html` <span class="muted">${j.name}</span>` : ''}</td>
          <td>${j.tenant}</td>
          <td><${State} s=${j.state} /></td>
          <td>${j.held ? j.held + '/' : ''}${j.gpus}${j.gpu_type ? ' ' + j.gpu_type : ''}</td>
          <td class="reason">${j.reason || ''}</td>
          <td>${j.state === 'running' ? fmtTime(j.started) : j.predicted_start ? html`${fmtIn(j.predicted_start)}${j.forecast ? html`<abbr title="forecast: the simulator's replay of the queue under the running policy">*</abbr>` : ''}` : '—'}</td>
          <td>${j.ended ? fmtTime(j.ended) : j.predicted_finish ? fmtIn(j.predicted_finish) : '—'}</td>
          <td>${j.deadline ? fmtTime(j.deadline) : '—'}</td>
          <td><${Risk} r=${j.risk} /></td>
          <td><${Actions} me=${me} job=${j} onDone=${setMsg} onErr=${onErr} /></td>
        </tr>`)}</tbody>
      </table></div>
      <${Pager} total=${d.total} offset=${offset} limit=${limit} onPage=${setOffset} what="jobs" />`}`;
}

function Actions({ me, job, onDone, onErr }) {
  const mine = me.admin || job.tenant === me.tenant;
  const active = ['pending', 'running', 'preempted', 'held'].includes(job.state);
  if (!mine || !active) return null;
  const can = a => me.actions.includes(a);
  const act = async a => {
    if (a === 'cancel' && !confirm(`Cancel job ${job.id}?`)) return;
    try { await api(`jobs/${encodeURIComponent(job.id)}/${a}`, { method: 'POST' }); onDone(`${a}: ${job.id} done`); } catch (e) { onErr(e); onDone(`${a} ${job.id}: ${e.message}`); }
  };
  return html`<span class="actions">
    ${can('hold') && (job.state === 'pending' || job.state === 'preempted') && html`<button onClick=${() => act('hold')} aria-label=${'Hold ' + job.id}>Hold</button>`}
    ${can('release') && job.state === 'held' && html`<button onClick=${() => act('release')} aria-label=${'Release ' + job.id}>Release</button>`}
    ${can('cancel') && html`<button class="danger" onClick=${() => act('cancel')} aria-label=${'Cancel ' + job.id}>Cancel</button>`}
  </span>`;
}

// ---- job -------------------------------------------------------------

const OUTCOME = { running: '#0072B2', finished: '#009E73', failed: '#D55E00', lost: '#D55E00', preempted: '#E69F00', resized: '#56B4E9', cancelled: '#999', interrupted: '#CC79A7', waiting: '#ccc', stopping: '#CC79A7' };

// The timeline's moments: starts, preemptions and resizes, with symbols
// (shape, not only colour, tells them apart).
const MOMENT = { start: '▶', restart: '▶', adopted: '▶', preempted: '‖', resized: '⇄' };
const MOMENT_NAME = { start: 'started', restart: 'restarted', adopted: 'adopted after a restart', preempted: 'preempted', resized: 'resized' };

function Timeline({ d }) {
  const j = d.job;
  const moments = d.events.filter(e => MOMENT[e.kind]);
  const t0 = new Date(j.submitted).getTime();
  const end = j.ended ? new Date(j.ended).getTime() : Date.now();
  const span = Math.max(1, end - t0);
  const x = t => (100 * (new Date(t).getTime() - t0) / span);
  return html`<figure class="timeline" aria-label="Timeline">
    <div class="track" role="list">
      ${(d.attempts || []).filter(a => a.started).map(a => {
        const s = x(a.started), e = a.ended ? x(a.ended) : 100;
        const label = `attempt ${a.n}${a.gpus && a.gpus.length ? ' on GPUs ' + a.gpus.join(',') : ''}: ${a.outcome}, ${fmtTime(a.started)} – ${a.ended ? fmtTime(a.ended) : 'now'}`;
        return html`<span role="listitem" class="bar" style=${`left:${s}%;width:${Math.max(0.5, e - s)}%;background:${OUTCOME[a.outcome] || '#0072B2'}`} title=${label} aria-label=${label}>${a.outcome === 'preempted' ? '‖' : a.outcome === 'failed' ? '✖' : ''}</span>`;
      })}
      ${d.events.map(e => html`<span class="tick" style=${`left:${x(e.time)}%`} title=${`${fmtTime(e.time)} ${e.kind}: ${e.message || ''}`}></span>`)}
      ${moments.map(e => html`<span class="moment" aria-hidden="true" style=${`left:${x(e.time)}%`} title=${`${fmtTime(e.time)} ${e.kind}: ${e.message || ''}`}>${MOMENT[e.kind]}</span>`)}
    </div>
    <figcaption class="muted">${fmtTime(j.submitted)} (submitted) → ${j.ended ? fmtTime(j.ended) + ' (' + j.state + ')' : 'now'}; bars are launches, coloured and marked by how they ended; ticks are events; ▶ starts, ‖ preemptions, ⇄ resizes, listed below with the policy's reasons.</figcaption>
    ${moments.length > 0 && html`<ol class="moments" aria-label="Starts, preemptions and resizes">
      ${moments.map(e => html`<li data-kind=${e.kind}><span class="mark" aria-hidden="true">${MOMENT[e.kind]}</span> ${fmtTime(e.time)} <strong>${MOMENT_NAME[e.kind]}</strong> ${e.message || ''}</li>`)}
    </ol>`}
  </figure>`;
}

function JobView({ me, id, tick, onErr }) {
  const [d, err] = useData('jobs/' + encodeURIComponent(id), [id, tick], onErr);
  const [msg, setMsg] = useState('');
  const logRef = useRef(null);
  useEffect(() => { if (logRef.current) logRef.current.scrollTop = logRef.current.scrollHeight; }, [d && d.log_tail]);
  if (err) return html`<p class="error" role="alert">${err}</p><p><a href="#/queue">Back to the queue</a></p>`;
  if (!d) return html`<p>Loading…</p>`;
  const j = d.job;
  const fields = [
    ['Tenant', j.tenant], ['State', html`<${State} s=${j.state} />`],
    ['GPUs', `${j.held} held of ${j.gpus}${j.min_gpus ? ` (elastic ${j.min_gpus}–${j.max_gpus})` : ''}${j.gpu_type ? ' ' + j.gpu_type : ''}`],
    ['Queue position', j.position || '—'], ['Reason', j.reason || '—'],
    ['Submitted', fmtTime(j.submitted)], ['Started', fmtTime(j.started)],
    ['Predicted start', j.state === 'running' ? 'running' : j.predicted_start ? fmtTime(j.predicted_start) + (j.forecast ? ' (simulator forecast)' : ' (policy)') : '—'],
    ['Predicted finish', j.predicted_finish ? fmtTime(j.predicted_finish) : j.ended ? 'ended ' + fmtTime(j.ended) : '—'],
    ['Deadline', j.deadline ? fmtTime(j.deadline) : '—'], ['Risk', html`<${Risk} r=${j.risk} />`],
    ['Time left (estimate)', fmtDur(j.remaining_s)],
    ['Throughput', j.throughput ? num(j.throughput) + ' /s' : '—'],
    ['Preemptions / restarts', `${j.preemptions || 0} / ${j.restarts || 0}`],
    ['Last message', j.message || '—'],
  ];
  return html`
    <p><a href="#/queue">← Queue</a></p>
    <h1>Job ${j.id}${j.name ? html` <span class="muted">${j.name}</span>` : ''}</h1>
    ${msg && html`<p class="note" role="status">${msg}</p>`}
    <${Actions} me=${me} job=${j} onDone=${setMsg} onErr=${onErr} />
    <div class="progress" role="progressbar" aria-valuemin="0" aria-valuemax="100" aria-valuenow=${Math.round(100 * j.progress)} aria-label="Progress">
      <span style=${'width:' + pct(j.progress)}></span><em>${pct(j.progress)}</em></div>
    <dl class="fields">${fields.map(([k, v]) => html`<dt>${k}</dt><dd>${v}</dd>`)}</dl>
    <h2>Timeline</h2>
    <${Timeline} d=${d} />
    <details open><summary>Events (${d.events.length})</summary>
      <div class="table-wrap"><table><thead><tr><th scope="col">Time</th><th scope="col">Event</th><th scope="col">Detail</th></tr></thead>
      <tbody>${d.events.map(e => html`<tr><td>${fmtTime(e.time)}</td><td>${e.kind}</td><td>${e.message || ''}</td></tr>`)}</tbody></table></div>
    </details>
    ${d.goodput && d.goodput.length > 0 && html`<h2>Goodput (fitted from the job's reports)</h2>
      <div class="table-wrap"><table><thead><tr><th scope="col">GPUs</th><th scope="col">Throughput /s</th><th scope="col">Speedup</th></tr></thead>
      <tbody>${d.goodput.map(p => html`<tr><td>${p.gpus}</td><td>${num(p.throughput)}</td><td>${num(p.speedup, 2)}×</td></tr>`)}</tbody></table></div>`}
    <h2>Log (tail)</h2>
    <pre class="log" ref=${logRef} tabindex="0" aria-label="Log tail">${d.log_tail || '(no output yet)'}</pre>`;
}

// ---- tenants ---------------------------------------------------------

function Tenants({ tick, onErr }) {
  const [hours, setHours] = useState(24);
  const [d, err] = useData('tenants?hours=' + hours, [hours, tick], onErr);
  return html`
    <h1>Tenants</h1>
    <div class="controls"><label>GPU-hours over <select value=${hours} onChange=${e => setHours(+e.target.value)}>
      ${[1, 6, 24, 168].map(x => html`<option value=${x}>${x < 24 ? x + ' h' : x / 24 + ' d'}</option>`)}</select></label></div>
    ${err && html`<p class="error" role="alert">${err}</p>`}
    ${d && html`<div class="table-wrap"><table>
      <thead><tr><th scope="col">Tenant</th><th scope="col">Quota</th><th scope="col">In use</th><th scope="col">Borrowed</th><th scope="col">Lent</th>
      <th scope="col">Running</th><th scope="col">Waiting (GPUs)</th><th scope="col">GPU-hours</th></tr></thead>
      <tbody>${d.tenants.map(t => html`<tr><th scope="row"><span class="swatch" style=${'background:' + colour(t.name)}></span>${t.name}</th>
        <td>${t.quota || '—'}</td><td>${t.in_use}</td><td>${t.borrowed}</td><td>${t.lent}</td>
        <td>${t.running}</td><td>${t.waiting} (${t.waiting_gpus})</td><td>${num(t.gpu_hours, 2)}</td></tr>`)}</tbody>
    </table></div>
    <p class="muted">GPU-hours from ${fmtTime(d.from)} to ${fmtTime(d.to)}, from the console's samples since this server started.</p>`}`;
}

// ---- utilisation -----------------------------------------------------

// Use is a step function: a sample holds until the next.
const steps = uPlot.paths.stepped({ align: 1 });

function Chart({ samples }) {
  const ref = useRef(null);
  const plot = useRef(null);
  useEffect(() => {
    const el = ref.current;
    const data = [samples.map(s => new Date(s.time).getTime() / 1000), samples.map(s => s.up), samples.map(s => s.allocated), samples.map(s => s.useful)];
    const width = Math.max(280, el.clientWidth);
    if (!plot.current) {
      plot.current = new uPlot({
        width, height: 280, scales: { x: { time: true } },
        series: [{}, { label: 'GPUs up', stroke: '#000', width: 1, dash: [4, 4], paths: steps },
          { label: 'allocated', stroke: '#E69F00', width: 2, fill: 'rgba(230,159,0,0.25)', paths: steps },
          { label: 'useful', stroke: '#0072B2', width: 2, dash: [8, 3], fill: 'rgba(0,114,178,0.2)', paths: steps }],
        axes: [{}, { label: 'GPUs' }],
      }, data, el);
    } else plot.current.setData(data);
    const onResize = () => plot.current && plot.current.setSize({ width: Math.max(280, el.clientWidth), height: 280 });
    addEventListener('resize', onResize);
    return () => removeEventListener('resize', onResize);
  }, [samples]);
  useEffect(() => () => { if (plot.current) plot.current.destroy(); plot.current = null; }, []);
  return html`<div ref=${ref} class="chart" role="img" aria-label="GPUs up, allocated and useful over time"></div>`;
}

function UsageView({ tick, onErr }) {
  const [hours, setHours] = useState(24);
  const [d, err] = useData('usage?hours=' + hours, [hours, tick], onErr);
  return html`
    <h1>Utilisation</h1>
    <div class="controls"><label>Period <select value=${hours} onChange=${e => setHours(+e.target.value)}>
      ${[1, 6, 24, 168].map(x => html`<option value=${x}>${x < 24 ? x + ' h' : x / 24 + ' d'}</option>`)}</select></label></div>
    ${err && html`<p class="error" role="alert">${err}</p>`}
    ${d && html`
      <dl class="cards">
        <div><dt>GPU-hours up</dt><dd>${num(d.up_gpu_hours, 2)}</dd></div>
        <div><dt>allocated</dt><dd>${num(d.allocated_gpu_hours, 2)}</dd></div>
        <div><dt>useful</dt><dd>${num(d.useful_gpu_hours, 2)}</dd></div>
        <div><dt>idle-allocated</dt><dd>${num(d.idle_allocated_gpu_hours, 2)}</dd></div>
      </dl>
      ${d.samples.length < 2 ? html`<p class="muted">Collecting samples…</p>` : html`<${Chart} samples=${d.samples} />`}
      <p class="muted">Useful: GPUs whose job's process runs; idle-allocated: held by jobs launching, backing off or stopping.</p>`}`;
}

// ---- what-if ---------------------------------------------------------

function WhatIfView({ me, summary, onErr }) {
  const [pols] = useData('policies', [], onErr);
  const [alt, setAlt] = useState('');
  const [res, setRes] = useState(null);
  const [err, setErr] = useState('');
  const [busy, setBusy] = useState(false);
  if (!me.whatif) return html`<h1>What-if</h1><p>This console cannot replay its queue.</p>`;
  const run = async e => {
    e.preventDefault();
    setBusy(true); setErr('');
    try { setRes(await api('whatif', { method: 'POST', body: JSON.stringify({ policy: alt || e.target.policy.value }) })); } catch (x) { onErr(x); setErr(String(x.message || x)); }
    setBusy(false);
  };
  const row = (k, f) => html`<tr><th scope="row">${k}</th><td>${f(res.base_stats)}</td><td>${f(res.alt_stats)}</td></tr>`;
  return html`
    <h1>What-if</h1>
    <p>Replays the live queue forward from now in the simulator, under the running policy${summary ? ' (' + summary.policy + ')' : ''} and under another, and shows each job's predicted JCT under both.</p>
    <form class="controls" onSubmit=${run}>
      <label>Policy <select name="policy" value=${alt} onChange=${e => setAlt(e.target.value)}>
        ${(pols || []).map(p => html`<option value=${p.name} title=${p.summary}>${p.name}</option>`)}</select></label>
      <button type="submit" disabled=${busy}>${busy ? 'Replaying…' : 'Replay'}</button>
    </form>
    ${err && html`<p class="error" role="alert">${err}</p>`}
    ${res && html`
      <p class="muted">${res.jobs} jobs on ${res.gpus} GPUs, model: ${res.model}; ${num(res.elapsed_s, 2)} s of server time.</p>
      <div class="table-wrap"><table class="compare"><thead><tr><th scope="col">Predicted JCT</th><th scope="col">${res.base} (running)</th><th scope="col">${res.alt}</th></tr></thead>
      <tbody>${row('mean', s => fmtDur(s.mean))}${row('median', s => fmtDur(s.p50))}${row('95th percentile', s => fmtDur(s.p95))}${row('max', s => fmtDur(s.max))}${row('unfinished', s => s.unfinished)}</tbody></table></div>
      <h2>Jobs, largest change first</h2>
      <div class="table-wrap"><table><thead><tr><th scope="col">Job</th><th scope="col">Tenant</th><th scope="col">GPUs</th><th scope="col">${res.base}</th><th scope="col">${res.alt}</th><th scope="col">Change</th></tr></thead>
      <tbody>${res.rows.map(r => html`<tr><td><a href=${'#/job/' + encodeURIComponent(r.id)}>${r.id}</a></td><td>${r.tenant}</td><td>${r.gpus}</td>
        <td>${fmtDur(r.base_jct)}</td><td>${fmtDur(r.alt_jct)}</td>
        <td>${r.base_jct >= 0 && r.alt_jct >= 0 ? (r.alt_jct < r.base_jct ? '▼ ' : r.alt_jct > r.base_jct ? '▲ ' : '') + fmtDur(Math.abs(r.alt_jct - r.base_jct)) : '—'}</td></tr>`)}</tbody></table></div>`}`;
}

render(html`<${App} />`, document.getElementById('app'));
