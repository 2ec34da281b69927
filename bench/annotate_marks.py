"""What the browser benches read on the Annotate page: which item is shown, and whether the
next one is (with the app idle), as page functions for Playwright's evaluate and waits."""

#: The shown item's key (its container's class), or null when the queue is done.
ITEM_KEY = """() => {
  const el = document.querySelector("[class*='st-key-annotate_item_']");
  return el ? el.className : null;
}"""
#: True once another item (or the empty queue) is shown and the script run has ended.
NEXT_ITEM = """(before) => {
  const el = document.querySelector("[class*='st-key-annotate_item_']");
  const app = document.querySelector("[data-testid='stApp']");
  return (!el || el.className !== before)
      && app.getAttribute('data-test-script-state') === 'notRunning';
}"""
