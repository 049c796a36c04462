"""What a person sees of a run's pages, measured in the browser: colliding text inside figures, empty
frames, and the requests a page makes.

Text boxes are measured as drawn: each SVG ``<text>`` of a plotly figure (titles, tick labels, legend
entries, annotations, subplot titles) as its box in the figure's own coordinates mapped to the screen
(``getBBox`` through ``getScreenCTM``), so a tick label rotated by plotly is the rotated rectangle it
occupies, not the larger upright box around it. Two texts collide when these rectangles overlap by more
than :data:`SLACK_PX` along every separating axis (the separating-axis test for convex polygons). A
legend entry scrolled out of the legend's box is not drawn and is not counted.
"""

from __future__ import annotations

SLACK_PX = 2  # boxes include the font's full ascent and descent: touching lines of digits are not a collision

# Resolves when every plotly figure on the page has drawn (or after ``ms``).
WAIT_FOR_FIGURES = """
(ms) => new Promise((resolve) => {
  const start = Date.now();
  (function poll() {
    const plots = [...document.querySelectorAll('.js-plotly-plot')];
    const drawn = plots.every((gd) => gd.querySelector('.main-svg') && gd._fullLayout);
    const pending = document.querySelectorAll('.nbkit-plotly:not(.js-plotly-plot)').length;
    if ((drawn && pending === 0) || Date.now() - start > ms) { resolve(plots.length); return; }
    setTimeout(poll, 100);
  })();
})
"""

# Per figure: its title, how many traces hold something to draw, and every pair of colliding texts.
MEASURE_FIGURES = """
(slack) => {
  const DRAWN_FROM = ['x', 'y', 'z', 'values', 'labels', 'r', 'theta', 'lat', 'lon', 'a', 'b', 'c',
    'open', 'high', 'low', 'close', 'dimensions', 'cells', 'value', 'ids', 'locations'];
  function draws(trace) {
    return DRAWN_FROM.some((k) => trace[k] !== undefined && trace[k] !== null &&
      (typeof trace[k] !== 'object' || trace[k].length === undefined || trace[k].length > 0));
  }
  function shown(el, gd) {
    for (let e = el; e && e !== gd; e = e.parentElement) {
      const s = getComputedStyle(e);
      if (s.display === 'none' || s.visibility === 'hidden' || parseFloat(s.opacity) === 0) return false;
    }
    return true;
  }
  function corners(el) {
    const b = el.getBBox();
    const m = el.getScreenCTM();
    if (!m || b.width === 0 || b.height === 0) return null;
    return [[b.x, b.y], [b.x + b.width, b.y], [b.x + b.width, b.y + b.height], [b.x, b.y + b.height]]
      .map(([x, y]) => [m.a * x + m.c * y + m.e, m.b * x + m.d * y + m.f]);
  }
  function inside(q, r) {
    const cx = q.reduce((s, p) => s + p[0], 0) / 4, cy = q.reduce((s, p) => s + p[1], 0) / 4;
    return cx >= r.left && cx <= r.right && cy >= r.top && cy <= r.bottom;
  }
  function collide(p, q) {
    for (const poly of [p, q]) {
      for (let i = 0; i < 4; i++) {
        const [x1, y1] = poly[i], [x2, y2] = poly[(i + 1) % 4];
        let nx = y2 - y1, ny = x1 - x2;
        const len = Math.hypot(nx, ny);
        if (!len) continue;
        nx /= len; ny /= len;
        const pa = p.map(([x, y]) => x * nx + y * ny), qa = q.map(([x, y]) => x * nx + y * ny);
        const overlap = Math.min(Math.max(...pa), Math.max(...qa)) -
          Math.max(Math.min(...pa), Math.min(...qa));
        if (overlap <= slack) return false;
      }
    }
    return true;
  }
  return [...document.querySelectorAll('.js-plotly-plot')].map((gd) => {
    const layout = gd._fullLayout || {};
    const title = (layout.title && layout.title.text) || gd.id || '(untitled)';
    const legends = [...gd.querySelectorAll('g.legend')].map((g) => {
      const bg = g.querySelector('rect.bg');
      return [g, bg ? bg.getBoundingClientRect() : g.getBoundingClientRect()];
    });
    const texts = [];
    gd.querySelectorAll('svg.main-svg text').forEach((t) => {
      const words = t.textContent.trim();
      if (!words || !shown(t, gd)) return;
      const q = corners(t);
      if (!q) return;
      const legend = legends.find(([g]) => g.contains(t));
      if (legend && !inside(q, legend[1])) return;  // scrolled out of the legend's box: not drawn
      texts.push([words, q]);
    });
    const pairs = [];
    for (let i = 0; i < texts.length; i++) {
      for (let j = i + 1; j < texts.length; j++) {
        if (collide(texts[i][1], texts[j][1])) pairs.push([texts[i][0], texts[j][0]]);
      }
    }
    const box = gd.getBoundingClientRect();
    return {
      title: String(title),
      traces: (gd.data || []).filter(draws).length,
      texts: texts.length,
      collisions: pairs,
      width: Math.round(box.width),
      height: Math.round(box.height),
    };
  });
}
"""


def measure_figures(page, wait_ms: int = 30_000) -> list[dict]:
    """Every plotly figure on ``page`` once drawn: title, traces that draw something, colliding text pairs."""
    page.evaluate(WAIT_FOR_FIGURES, wait_ms)
    return page.evaluate(MEASURE_FIGURES, SLACK_PX)


def offline_context(browser, viewport: dict[str, int]):
    """A browser context that refuses every request that is not a local file; returns it and the list the
    refused addresses are appended to."""
    context = browser.new_context(viewport=viewport, device_scale_factor=1)
    refused: list[str] = []

    def route(r):
        if r.request.url.startswith(("file://", "data:")):
            return r.continue_()
        refused.append(r.request.url)
        return r.abort()

    context.route("**/*", route)
    return context, refused
