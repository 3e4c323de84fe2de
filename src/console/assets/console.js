// The operator console's only script (CSP: script-src 'self', nothing inline). Pages work
// without it; it adds two conveniences:
//  - <body data-refresh="N">: reload the page every N seconds while the tab is visible and
//    no form field has focus (the overview);
//  - [data-job]: poll a replay's progress (JSON) every second and update its fields until done.
(() => {
  const refresh = Number(document.body.dataset.refresh || 0);
  if (refresh > 0) {
    setInterval(() => {
      const busy = document.activeElement && /^(INPUT|SELECT|TEXTAREA)$/.test(document.activeElement.tagName);
      if (document.visibilityState === 'visible' && !busy) window.location.reload();
    }, refresh * 1000);
  }

  const job = document.querySelector('[data-job]');
  if (job) {
    const set = (field, value) => {
      for (const el of job.querySelectorAll(`[data-field="${field}"]`)) {
        if (el.tagName === 'PROGRESS') el.value = value;
        else el.textContent = String(value);
      }
    };
    const poll = async () => {
      try {
        const r = await fetch(job.dataset.job, {
          headers: { accept: 'application/json' },
          credentials: 'same-origin',
        });
        if (!r.ok) return;
        const v = await r.json();
        const max = String(Math.max(1, v.total));
        for (const p of job.querySelectorAll('progress')) p.max = max;
        set('state', v.state);
        set('copied', v.copied);
        set('total', v.total);
        set('total2', v.total);
        set('published', v.published);
        set('pending', v.pending);
        set('unhealthy', v.unhealthy);
        set('message', v.message);
        set('copiedProgress', v.copied);
        set('publishedProgress', v.published);
        if (v.state === 'done' || v.state === 'failed') return;
      } catch {
        // The relay restarting: try again.
      }
      setTimeout(poll, 1000);
    };
    setTimeout(poll, 500);
  }
})();
