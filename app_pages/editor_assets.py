"""The Editor's look and its one script: sticky run controls and status line, the word diff's
colours, and a guard against losing typed edit text, the overview strip's links and keeping the
newest (or focused) step in view."""

EDITOR_CSS = """<style>
.st-key-run_controls { position: sticky; top: 3.75rem; z-index: 10; background: var(--background-color, #fff);
  padding: 0.25rem 0; box-shadow: 0 -1rem 0 #ffffff; }
.st-key-status_line { position: sticky; top: calc(3.75rem + 58px); z-index: 9; background: var(--background-color, #fff);
  box-shadow: 0 -1.1rem 0 #ffffff; border-bottom: 1px solid #d0d7de; }
[data-testid="stLayoutWrapper"]:has(> .st-key-run_controls) { position: sticky; top: 3.75rem; z-index: 10;
  background: var(--background-color, #ffffff); background-color: #ffffff; box-shadow: 0 -1rem 0 #ffffff; }
[data-testid="stLayoutWrapper"]:has(> .st-key-status_line) { position: sticky; top: calc(3.75rem + 58px); z-index: 9;
  background-color: #ffffff; box-shadow: 0 -1.1rem 0 #ffffff; }
del.rd-del { background: #ffd7d5; text-decoration: line-through; }
ins.rd-ins { background: #ccffd8; text-decoration: none; }
.rd-was { white-space: pre-wrap; word-break: break-word; font-size: 0.9rem; }
[class*="st-key-step_"] { scroll-margin-top: calc(3.75rem + 100px); }
[class*="st-key-h_check_"] { scroll-margin-bottom: 1.5rem; }
</style>"""
# Warn before a reload or a closed tab loses edit text that was typed but not applied.
UNSAVED_GUARD = """<script>
if (!window.__reactEditorGuard) {
  window.__reactEditorGuard = true;
  const panels = '[class*="st-key-edit_panel_"], [class*="st-key-human_panel"]';
  document.addEventListener('input', (e) => {
    if (e.target.closest && e.target.closest(panels)) { window.__reactEditorDirty = true; }
  }, true);
  document.addEventListener('click', (e) => {
    if (e.target.closest && e.target.closest(panels) && e.target.closest('button')) { window.__reactEditorDirty = false; }
  }, true);
  window.addEventListener('beforeunload', (e) => {
    if (window.__reactEditorDirty) { e.preventDefault(); e.returnValue = ''; }
  });
  // a mark of the overview strip scrolls its step into view (no anchor elements per step needed)
  document.addEventListener('click', (e) => {
    const a = e.target.closest && e.target.closest('a.ov-mark');
    if (!a) { return; }
    const n = (a.getAttribute('href') || '').replace('#step-', '');
    const box = document.querySelector('.st-key-step_' + n) || document.querySelector('[data-step="' + n + '"]');
    if (box) { e.preventDefault(); box.scrollIntoView({block: 'start', behavior: 'smooth'}); }
  }, true);
  // while a run is on (a "follow_newest" marker is drawn), bring the newest step into view
  let newest = 0;
  new MutationObserver(() => {
    if (!document.querySelector('[class*="st-key-follow_newest"]')) { newest = 0; return; }
    const boxes = document.querySelectorAll('[class*="st-key-step_"]');
    const last = boxes[boxes.length - 1];
    const n = last ? parseInt((last.className.match(/st-key-step_(\\d+)/) || [0, 0])[1]) : 0;
    if (n > newest) { newest = n; last.scrollIntoView({block: 'end', behavior: 'smooth'}); }
  }).observe(document.body, {childList: true, subtree: true});
  // a focus marker (an opened panel, a search hit, a stop condition, a finished run) brings its step into view, once
  const seen = new Set();
  new MutationObserver(() => {
    document.querySelectorAll('[class*="st-key-focus_step_"]').forEach((m) => {
      const k = m.className.match(/st-key-focus_step_(\\d+)_(\\d+)/);
      const box = k && !seen.has(k[0]) && document.querySelector('.st-key-step_' + k[1]);
      if (box) { seen.add(k[0]); box.scrollIntoView({block: 'start'}); }
    });
  }).observe(document.body, {childList: true, subtree: true});
  // a human-mode warning and its "Take it anyway" come fully into view where they are drawn, once each
  new MutationObserver(() => {
    document.querySelectorAll('[class*="st-key-h_check_"]').forEach((box) => {
      const k = box.className.match(/st-key-h_check_[0-9_]+/);
      if (k && !seen.has(k[0])) { seen.add(k[0]); box.scrollIntoView({block: 'nearest'}); }
    });
  }).observe(document.body, {childList: true, subtree: true});
}
</script>"""
