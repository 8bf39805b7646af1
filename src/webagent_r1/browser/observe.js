// Page -> text for the agent, in ONE page.evaluate call (see observation.py).
//
// Walks the rendered DOM once, drops what a user cannot see or use (scripts, styles, hidden
// and zero-size nodes, comments, svg internals, decorative wrappers), numbers every visible
// interactive element with a `data-webagent-id` attribute on the live DOM (execute.py finds
// elements by it), and serialises the result twice: simplified HTML (WebRL style) and the
// compact one-line-per-node format. Every output line carries the document y of its first
// item so Python can start a truncated full-page view at the current scroll position.
//
// Ids: an element keeps the id it got in an earlier call on the same document; new elements
// get the next free number. A fresh page is therefore numbered in document order, and ids do
// not move when the page scrolls or a menu opens.
(args) => {
  const viewportOnly = !!(args && args.viewportOnly);
  // Serialise only the requested format when given ('html' | 'compact'); both otherwise.
  const format = (args && args.format) || null;
  const ATTR = 'data-webagent-id';
  const VW = window.innerWidth;
  const VH = window.innerHeight;
  const SX = window.scrollX;
  const SY = window.scrollY;
  const MAX_NAME = 100;
  const MAX_VALUE = 100;
  const MAX_OPTIONS = 30;

  const SKIP = new Set([
    'script', 'style', 'noscript', 'template', 'head', 'meta', 'link', 'title', 'base',
    'iframe', 'frame', 'frameset', 'object', 'embed', 'canvas', 'video', 'audio', 'map',
    'datalist', 'svg', 'math', 'option', 'optgroup', 'source', 'track', 'param',
  ]);
  // Elements whose children are never walked (a select's options are listed by the select).
  const LEAF = new Set(['input', 'select', 'textarea', 'img', 'br', 'hr']);
  // Structural tags kept in the HTML format; everything else is unwrapped.
  const KEEP = new Set([
    'h1', 'h2', 'h3', 'h4', 'h5', 'h6', 'ul', 'ol', 'li', 'table', 'tr', 'td', 'th', 'form',
    'label', 'dl', 'dt', 'dd',
  ]);
  // Tags that start a new line in both formats.
  const BLOCK_TAGS = new Set([
    'h1', 'h2', 'h3', 'h4', 'h5', 'h6', 'ul', 'ol', 'li', 'table', 'tr', 'form', 'dl', 'dt',
    'dd', 'p',
  ]);
  const HEADINGS = new Set(['h1', 'h2', 'h3', 'h4', 'h5', 'h6']);
  const ROLES = new Set([
    'button', 'link', 'checkbox', 'radio', 'tab', 'menuitem', 'menuitemcheckbox',
    'menuitemradio', 'option', 'combobox', 'textbox', 'searchbox', 'switch', 'slider',
    'spinbutton', 'listbox', 'treeitem',
  ]);
  const BUTTON_INPUTS = new Set(['submit', 'button', 'reset', 'image']);
  const PLAIN_TEXT_INPUTS = new Set(['text', 'search', '']);

  const clean = (s) => (s || '').replace(/\s+/g, ' ').trim();
  const cut = (s, n) => (s.length > n ? s.slice(0, n - 1) + '…' : s);
  const quote = (s) => '"' + s.replace(/"/g, "'") + '"';
  const esc = (s) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
  const attrEsc = (s) => esc(s).replace(/"/g, '&quot;');
  const inView = (r) =>
    r.bottom > 0 && r.right > 0 && r.top < VH && r.left < VW && (r.width > 0 || r.height > 0);
  const docY = (r) => Math.max(0, Math.round(r.top + SY));

  // 1) Id bookkeeping: continue numbering after the largest id already on the page.
  let nextId = window.__webagentNextId || 1;
  for (const e of document.querySelectorAll('[' + ATTR + ']')) {
    const v = parseInt(e.getAttribute(ATTR), 10);
    if (v >= nextId) nextId = v + 1;
  }
  const seen = new Set();
  function assignId(el) {
    let v = el.getAttribute(ATTR);
    // A cloned node carries its original's id: the first one in document order keeps it.
    if (v === null || !/^\d+$/.test(v) || seen.has(v)) {
      v = String(nextId++);
      el.setAttribute(ATTR, v);
    }
    seen.add(v);
    return v;
  }

  // 2) Accessible-ish names, roles and states (a small subset of the ARIA algorithms).
  function controlFreeText(root) {
    // Text of a <label> without the text of the control inside it (a select's options).
    const parts = [];
    const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
    for (let t = walker.nextNode(); t; t = walker.nextNode()) {
      const p = t.parentElement;
      if (p && p.closest('select,textarea,button,script,style')) continue;
      parts.push(t.nodeValue);
    }
    return clean(parts.join(' '));
  }
  function roleOf(el, tag) {
    const r = (el.getAttribute('role') || '').trim().toLowerCase();
    if (ROLES.has(r)) return r === 'searchbox' ? 'textbox' : r;
    if (tag === 'a') return 'link';
    if (tag === 'button' || tag === 'summary') return 'button';
    if (tag === 'select') return el.multiple ? 'listbox' : 'combobox';
    if (tag === 'textarea') return 'textbox';
    if (tag === 'input') {
      const t = el.type;
      if (t === 'checkbox' || t === 'radio') return t;
      if (BUTTON_INPUTS.has(t) || t === 'file' || t === 'color') return 'button';
      if (t === 'range') return 'slider';
      return 'textbox';
    }
    if (el.isContentEditable) return 'textbox';
    return 'clickable';
  }
  function nameOf(el, tag, text) {
    const lb = el.getAttribute('aria-labelledby');
    if (lb) {
      const s = clean(
        lb.split(/\s+/).map((i) => {
          const e = document.getElementById(i);
          return e ? e.textContent : '';
        }).join(' '),
      );
      if (s) return s;
    }
    const al = clean(el.getAttribute('aria-label'));
    if (al) return al;
    if (tag === 'input' && BUTTON_INPUTS.has(el.type)) {
      return clean(el.value || el.alt || (el.type === 'reset' ? 'Reset' : 'Submit'));
    }
    if (tag === 'input' || tag === 'select' || tag === 'textarea') {
      if (el.labels && el.labels.length) {
        const s = clean(Array.from(el.labels).map(controlFreeText).join(' '));
        if (s) return s;
      }
      return clean(el.placeholder || el.title || el.name || '');
    }
    if (text) return text;
    const img = el.querySelector('img[alt]');
    if (img && clean(img.alt)) return clean(img.alt);
    const st = el.querySelector('svg title');
    if (st && clean(st.textContent)) return clean(st.textContent);
    return clean(el.title || '');
  }
  function isInteractive(el, tag) {
    if (tag === 'a') return el.hasAttribute('href') || el.hasAttribute('onclick');
    if (tag === 'button' || tag === 'select' || tag === 'textarea' || tag === 'summary') {
      return true;
    }
    if (tag === 'input') return true;
    const r = (el.getAttribute('role') || '').trim().toLowerCase();
    if (ROLES.has(r)) return true;
    if (el.hasAttribute('onclick')) return true;
    if (el.isContentEditable && !(el.parentElement && el.parentElement.isContentEditable)) {
      return true;
    }
    return false;
  }
  // A pointer cursor that starts at this element (not inherited) marks a script-driven
  // clickable (listeners added with addEventListener leave no attribute to see).
  function pointerCandidate(tag, st, ctx) {
    return st.cursor === 'pointer' && ctx.cursor !== 'pointer' && !ctx.inInteractive &&
      tag !== 'label' && tag !== 'body' && tag !== 'html';
  }

  function info(el, tag, role) {
    const o = {};
    if (el.disabled || el.getAttribute('aria-disabled') === 'true') o.disabled = true;
    const ae = el.getAttribute('aria-expanded');
    if (ae === 'true' || ae === 'false') o.expanded = ae === 'true';
    if (tag === 'summary' && el.parentElement && el.parentElement.localName === 'details') {
      o.expanded = el.parentElement.open;
    }
    if (el.getAttribute('aria-selected') === 'true') o.selected = true;
    if (tag === 'input' && (el.type === 'checkbox' || el.type === 'radio')) {
      o.checked = el.checked;
    } else if (role === 'checkbox' || role === 'radio' || role === 'switch' ||
               role === 'menuitemcheckbox' || role === 'menuitemradio') {
      o.checked = el.getAttribute('aria-checked') === 'true';
    }
    if (tag === 'select') {
      const opts = Array.from(el.options);
      o.options = opts.slice(0, MAX_OPTIONS).map((x) => ({
        label: clean(x.label || x.textContent), value: x.value, selected: x.selected,
      }));
      o.moreOptions = Math.max(0, opts.length - MAX_OPTIONS);
      o.value = opts.filter((x) => x.selected).map((x) => clean(x.label || x.textContent))
        .join(', ');
    } else if (tag === 'textarea' || (tag === 'input' && role === 'textbox') ||
               (tag === 'input' && role === 'slider')) {
      // Never echo a password into the model's context (or into saved trajectories).
      o.value = el.type === 'password' && el.value ? '••••' : el.value;
    } else if (role === 'textbox' && el.isContentEditable) {
      o.value = clean(el.innerText);
    }
    if (tag === 'input') {
      if (!PLAIN_TEXT_INPUTS.has(el.type) && role === 'textbox') o.type = el.type;
      if (el.type === 'file') o.type = 'file';
    }
    return o;
  }

  // 3) The walk: DOM -> simplified nodes.
  //   {k:'t', s, y}            text run
  //   {k:'b'}                  line break (block boundary)
  //   {k:'e', tag, y, kids...} kept element (interactive ones carry id/role/name/info)
  const range = document.createRange();
  function textInView(node) {
    range.selectNodeContents(node);
    for (const r of range.getClientRects()) if (inView(r)) return true;
    return false;
  }
  function children(el) {
    if (el.shadowRoot) return el.shadowRoot.childNodes;
    if (el.localName === 'slot') return el.assignedNodes({ flatten: true });
    // A closed <details> renders only its <summary>: the rest is laid out but not painted
    // (content-visibility), so styles and boxes alone do not reveal that it is hidden.
    if (el.localName === 'details' && !el.open) {
      return Array.from(el.children).filter((c) => c.localName === 'summary');
    }
    return el.childNodes;
  }
  const hasInteractive = (nodes) =>
    nodes.some((n) => n.k === 'e' && (n.id !== undefined || hasInteractive(n.kids || [])));
  const emptyCell = (n) =>
    n.k === 'e' && (n.tag === 'td' || n.tag === 'th') && !hasContent(n.kids);
  const hasContent = (nodes) => nodes.some((n) => n.k !== 'b' && !emptyCell(n));
  let count = 0;
  let lastText = null; // the last text run pushed, in document order

  function walk(node, ctx, out) {
    if (node.nodeType === Node.TEXT_NODE) {
      if (!ctx.visible) return;
      const s = clean(node.nodeValue);
      if (!s) {
        // A whitespace-only node still separates its neighbours: <span>of 40</span> <b>1</b>
        // reads "of 40 1", not "of 401". Walking is in document order, so mark the last run.
        if (lastText && node.nodeValue.length) lastText.trail = true;
        return;
      }
      if (viewportOnly && !textInView(node)) return;
      // Whitespace at the edges decides whether neighbouring runs join with a space:
      // <span>$</span><span>9.99</span> reads "$9.99", not "$ 9.99".
      const raw = node.nodeValue;
      lastText = { k: 't', s, y: ctx.y, lead: /^\s/.test(raw), trail: /\s$/.test(raw) };
      out.push(lastText);
      return;
    }
    if (node.nodeType !== Node.ELEMENT_NODE) return;
    const el = node;
    const tag = el.localName;
    if (SKIP.has(tag) || el.namespaceURI !== 'http://www.w3.org/1999/xhtml') return;
    if (tag === 'input' && el.type === 'hidden') return;
    if (el.getAttribute('aria-hidden') === 'true') return;
    const st = getComputedStyle(el);
    if (st.display === 'none') return;
    const visible = st.visibility === 'visible';
    const r = el.getBoundingClientRect();
    const hasBox = r.width > 0 && r.height > 0;
    // A zero-size box that clips its overflow shows nothing (sr-only tricks, collapsed menus);
    // one that does not clip may still show its children (floats, display: contents).
    if (!hasBox && st.display !== 'contents' &&
        (st.overflowX !== 'visible' || st.overflowY !== 'visible')) return;
    if (tag === 'br' || tag === 'hr') {
      out.push({ k: 'b' });
      return;
    }
    const y = docY(r);
    if (tag === 'img') {
      const alt = clean(el.alt);
      if (alt && visible && hasBox && !ctx.inInteractive && (!viewportOnly || inView(r))) {
        out.push({ k: 'e', tag: 'img', alt: cut(alt, MAX_NAME), y, kids: [] });
      }
      return;
    }
    const usable = visible && hasBox;
    const interactive = usable && isInteractive(el, tag);
    const candidate = usable && !interactive && pointerCandidate(tag, st, ctx);
    const id = interactive ? assignId(el) : undefined;
    const childCtx = {
      visible,
      y, // text runs take their element's position: cheaper than a Range per text node
      cursor: st.cursor,
      inInteractive: ctx.inInteractive || interactive || candidate,
    };
    const kids = [];
    if (!LEAF.has(tag)) for (const c of children(el)) walk(c, childCtx, kids);

    if (interactive || (candidate && !hasInteractive(kids) && hasContent(kids))) {
      const container = hasInteractive(kids);
      if (viewportOnly && !inView(r) && !(container && hasContent(kids))) return;
      const role = roleOf(el, tag);
      const text = container ? '' : cut(clean(el.innerText || ''), MAX_NAME);
      const n = {
        k: 'e', tag, y, kids: container ? kids : [], container,
        id: id === undefined ? assignId(el) : id,
        role, text, name: cut(nameOf(el, tag, text), MAX_NAME), info: info(el, tag, role),
        attrs: htmlAttrs(el, tag),
      };
      count++;
      out.push(n);
      return;
    }
    // Empty cells are kept so a table row's columns stay aligned.
    if (!hasContent(kids) && tag !== 'td' && tag !== 'th') return;
    if (KEEP.has(tag)) {
      const n = { k: 'e', tag, y, kids };
      if (tag === 'label' && el.control) n.labelsControl = true;
      out.push(n);
      return;
    }
    // Decorative wrapper: keep its children; a block-level box still breaks the line.
    const block = BLOCK_TAGS.has(tag) || !/^inline/.test(st.display) && st.display !== 'contents';
    if (block) out.push({ k: 'b' });
    for (const k of kids) out.push(k);
    if (block) out.push({ k: 'b' });
  }

  // Attributes worth showing in the HTML format (WebRL keeps a similar short list).
  function htmlAttrs(el, tag) {
    const a = [];
    const add = (k, v) => {
      if (v !== null && v !== undefined && v !== '') a.push([k, String(v)]);
    };
    const role = el.getAttribute('role');
    if (role) add('role', role);
    if (tag === 'a') add('href', cut(el.getAttribute('href') || '', 200));
    if (tag === 'input') {
      if (el.type !== 'text') add('type', el.type);
      add('name', el.name);
      add('placeholder', el.placeholder);
      if (el.type !== 'checkbox' && el.type !== 'radio' && el.type !== 'file' &&
          el.type !== 'password') add('value', cut(el.value, MAX_VALUE));
      if (el.type === 'password' && el.value) add('value', '••••');
      if (el.checked) a.push(['checked']);
    }
    if (tag === 'select' || tag === 'textarea') {
      add('name', el.name);
      add('placeholder', el.placeholder);
    }
    add('aria-label', el.getAttribute('aria-label'));
    add('title', el.title);
    if (el.disabled) a.push(['disabled']);
    const ac = el.getAttribute('aria-checked');
    if (ac) add('aria-checked', ac);
    const ae = el.getAttribute('aria-expanded');
    if (ae) add('aria-expanded', ae);
    return a;
  }

  // 4) Serialisers. Both return {lines, ys}: ys[i] is the document y of line i's first item.
  const Y = (y) => (y === undefined ? '' : '\u0001' + y + '\u0002');

  function htmlOpen(n) {
    let s = '<' + n.tag;
    if (n.id !== undefined) s += ' id="' + n.id + '"';
    for (const [k, v] of n.attrs || []) {
      s += v === undefined ? ' ' + k : ' ' + k + '="' + attrEsc(v) + '"';
    }
    return s + '>';
  }
  function htmlJoin(nodes) {
    let s = '';
    let prev = null;
    for (const n of nodes) {
      if (n.k === 'b') {
        s += '\n';
        prev = null;
        continue;
      }
      const t = n.k === 't' ? n : null;
      const piece = t ? (glued(prev, t) ? '' : Y(n.y)) + esc(n.s) : htmlEl(n);
      if (s && !s.endsWith('\n') && !piece.startsWith('\n') && !glued(prev, t)) s += ' ';
      s += piece;
      prev = t;
    }
    return s;
  }
  function htmlEl(n) {
    if (n.tag === 'img') return Y(n.y) + '<img alt="' + attrEsc(n.alt) + '">';
    let inner;
    if (n.id !== undefined && !n.container) {
      if (n.tag === 'input') return Y(n.y) + htmlOpen(n);
      if (n.tag === 'select') {
        inner = (n.info.options || []).map((o) => '<option' + (o.selected ? ' selected' : '') +
          (o.label ? '>' + esc(o.label) : ' value="' + attrEsc(o.value) + '">') + '</option>')
          .join('');
        if (n.info.moreOptions) inner += '<option>… ' + n.info.moreOptions + ' more</option>';
      } else if (n.tag === 'textarea') {
        inner = esc(cut(clean(n.info.value || ''), MAX_VALUE));
      } else {
        // Without text, show the name unless an attribute (aria-label, title) already does.
        const named = (n.attrs || []).some(([k]) => k === 'aria-label' || k === 'title');
        inner = esc(n.text || (named ? '' : n.name || ''));
      }
    } else {
      inner = htmlJoin(n.kids);
    }
    const s = Y(n.y) + htmlOpen(n) + inner + '</' + n.tag + '>';
    return BLOCK_TAGS.has(n.tag) ? '\n' + s + '\n' : s;
  }
  function splitLines(s) {
    const lines = [];
    const ys = [];
    let lastY = 0;
    for (const raw of s.split('\n')) {
      const m = raw.match(/\u0001(\d+)\u0002/);
      const line = raw.replace(/\u0001\d+\u0002/g, '').trim();
      if (!line) continue;
      if (m) lastY = parseInt(m[1], 10);
      lines.push(line);
      ys.push(lastY);
    }
    return { lines, ys };
  }

  function compactEl(n) {
    let s = '[' + n.id + '] ' + n.role;
    if (n.name) s += ' ' + quote(n.name);
    const o = n.info;
    if (o.type) s += ' type=' + o.type;
    if (o.value && n.role !== 'combobox' && n.role !== 'listbox') {
      s += ' value=' + quote(cut(o.value.replace(/\s+/g, ' '), MAX_VALUE));
    }
    if (o.checked) s += ' checked';
    if (o.selected) s += ' selected';
    if (o.expanded === true) s += ' expanded';
    if (o.expanded === false) s += ' collapsed';
    if (o.disabled) s += ' disabled';
    if (o.options) {
      if (o.value) s += ' value=' + quote(o.value);
      s += ' options: ' + o.options.map((x) => quote(x.label || x.value)).join(', ');
      if (o.moreOptions) s += ', … ' + o.moreOptions + ' more';
    }
    return s;
  }
  // Adjacent text runs join without a space unless the source had whitespace between them.
  const glued = (prev, t) => !!(t && prev && !prev.trail && !t.lead);
  function inlineParts(nodes, parts) {
    for (const n of nodes) {
      if (n.k === 'b') parts.push({ s: '', t: null });
      else if (n.k === 't') parts.push({ s: n.s, t: n });
      else if (n.id !== undefined) {
        parts.push({ s: compactEl(n), t: null });
        if (n.container) inlineParts(n.kids, parts);
      } else if (n.tag !== 'img') inlineParts(n.kids, parts);
    }
    return parts;
  }
  function inlineText(nodes) {
    let out = '';
    let prev = null;
    for (const p of inlineParts(nodes, [])) {
      if (p.s) out += !out || glued(prev, p.t) ? p.s : ' ' + p.s;
      prev = p.t;
    }
    return out;
  }
  function firstY(nodes) {
    for (const n of nodes) {
      if (n.y !== undefined) return n.y;
      if (n.kids) {
        const y = firstY(n.kids);
        if (y !== undefined) return y;
      }
    }
    return undefined;
  }
  function compact(nodes) {
    const lines = [];
    const ys = [];
    let buf = '';
    let bufY;
    let prev = null; // the last text run in buf, to decide on a space before the next one
    let lastY = 0;
    const emit = (line, y) => {
      if (y !== undefined) lastY = y;
      lines.push(line);
      ys.push(lastY);
    };
    const flush = () => {
      if (buf) emit(buf, bufY);
      buf = '';
      bufY = undefined;
      prev = null;
    };
    const add = (s, y, t) => {
      if (!buf) bufY = y;
      buf += !buf || glued(prev, t) ? s : ' ' + s;
      prev = t || null;
    };
    function visit(list, dropText) {
      for (const n of list) {
        if (n.k === 'b') flush();
        else if (n.k === 't') {
          if (!dropText) add(n.s, n.y, n);
        } else if (n.id !== undefined) {
          flush();
          emit(compactEl(n), n.y);
          if (n.container) {
            visit(n.kids, false);
            flush();
          }
        } else if (n.tag === 'img') {
          if (!dropText) add('img ' + quote(n.alt), n.y);
        } else if (HEADINGS.has(n.tag) && !hasInteractive(n.kids)) {
          flush();
          emit('heading ' + quote(inlineText(n.kids)), n.y);
        } else if (n.tag === 'tr') {
          flush();
          const cells = n.kids.filter((c) => c.k === 'e')
            .map((c) => (c.tag === 'td' || c.tag === 'th' ? inlineText(c.kids) : inlineText([c])));
          emit(cells.join(' | '), firstY(n.kids) ?? n.y);
        } else if (n.tag === 'label' && n.labelsControl) {
          // The control's name already carries the label's text.
          visit(n.kids, true);
        } else if (BLOCK_TAGS.has(n.tag)) {
          flush();
          visit(n.kids, dropText);
          flush();
        } else {
          visit(n.kids, dropText);
        }
      }
    }
    visit(nodes, false);
    flush();
    return { lines, ys };
  }

  // One string per field: Playwright serialises a long string much faster than an array of
  // a thousand small values.
  const pack = (b) => ({ text: b.lines.join('\n'), ys: b.ys.join(',') });

  const root = [];
  if (document.body) {
    walk(document.body, { visible: true, cursor: 'auto', inInteractive: false, y: 0 }, root);
  }
  window.__webagentNextId = nextId;
  const doc = document.scrollingElement || document.documentElement;
  return {
    url: location.href,
    // when this document started loading: a new document (even at the same URL) differs
    document: performance.timeOrigin,
    title: document.title,
    html: format === 'compact' ? null : pack(splitLines(htmlJoin(root))),
    compact: format === 'html' ? null : pack(compact(root)),
    interactive: count,
    scroll: {
      x: SX, y: SY, viewportWidth: VW, viewportHeight: VH,
      pageHeight: doc ? doc.scrollHeight : VH,
    },
  };
}
