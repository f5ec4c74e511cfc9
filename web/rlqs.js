// The live view's RLQS panel: per limited rule of Envoy's Rate Limit Quota Service (GET /v1/live,
// "rlqs"), how this instance splits it: its clients (Envoy, bucket) and buckets, the rate assigned
// to them against the rule's limit (of each bucket: N buckets have N times it), and the rate they
// report (allowed + denied: their demand). Hidden when the server has no RLQS rules.
'use strict';

function rlqsRate(v) {
  if (v === null || v === undefined) return '–';
  return v >= 100 ? String(Math.round(v)) : String(Math.round(v * 10) / 10);
}

function rlqsRow(r, esc) {
  // What the instance's buckets of this rule may take together: the limit of each, times their count.
  const cap = r.limit_rate * Math.max(1, r.buckets);
  const share = cap > 0 ? Math.min(1, r.assigned_rate / cap) : 0;
  const demand = cap > 0 ? Math.min(1, r.reported_rate / cap) : 0;
  return `<tr data-rule="${esc(r.rule)}"><td>${esc(r.domain)}</td><td>${esc(r.rule)}<div class="desc">${esc(r.match)}</div></td>` +
    `<td class="n clients">${r.clients}</td><td class="n buckets">${r.buckets}</td>` +
    `<td class="n"><b class="assigned">${rlqsRate(r.assigned_rate)}</b>/s of <span class="limit">${rlqsRate(r.limit_rate)}</span>/s` +
    `${r.buckets > 1 ? ` × ${r.buckets}` : ''}` +
    `<svg class="split" viewBox="0 0 100 8" preserveAspectRatio="none" role="img" aria-label="assigned and reported against the limit">` +
    `<rect class="split-demand" width="${(demand * 100).toFixed(1)}" height="3" y="5"/>` +
    `<rect class="split-assigned" width="${(share * 100).toFixed(1)}" height="4"/></svg></td>` +
    `<td class="n"><b class="reported">${rlqsRate(r.reported_rate)}</b>/s</td></tr>`;
}

// Draws `rlqs` (the JSON's object, or undefined: no RLQS service) into the element `panel`.
function drawRlqs(panel, rlqs, esc) {
  if (!rlqs || rlqs.rules.length === 0) {
    panel.hidden = true;
    return;
  }
  panel.hidden = false;
  panel.querySelector('.rlqs-mode').innerHTML = rlqs.shared
    ? 'this instance’s part of each limit, shared with the other instances on the store' +
      (rlqs.sync_errors ? ` · <span class="badge degraded">${rlqs.sync_errors} failed syncs</span>` : '')
    : 'the whole limit, split among this instance’s clients';
  panel.querySelector('tbody').innerHTML = rlqs.rules.map((r) => rlqsRow(r, esc)).join('');
}

window.floodgateRlqs = { drawRlqs };
