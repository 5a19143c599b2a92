// skerry-wasm for browsers and bundlers: the wasm-bindgen web glue, with initialisation
// tracked so that a reader opened before `init()` / `initSync()` fails with an error that
// says what to do (instead of "Cannot read properties of undefined").
import * as glue from './pkg/web/skerry_wasm.js';

let ready = false;

/**
 * Loads the module: `await init()` fetches `skerry_wasm_bg.wasm` next to this file; pass
 * `{ module_or_path }` (a URL, a Response, bytes or a compiled `WebAssembly.Module`) otherwise.
 */
export default async function init(options) {
  const out = await glue.default(options);
  ready = true;
  return out;
}

/** Synchronous initialisation from a compiled module or bytes: `initSync({ module })`. */
export function initSync(options) {
  const out = glue.initSync(options);
  ready = true;
  return out;
}

function notReady() {
  return Object.assign(
    new Error(
      'skerry-wasm is not initialised: call `await init()` first (browsers), or ' +
        "`initSync({ module })` with `import module from 'skerry-wasm/skerry_wasm_bg.wasm'` " +
        "(Workers; or import 'skerry-wasm/worker', which does this for you)",
    ),
    { code: 'E_NOT_INITIALISED', retryable: false },
  );
}

const open = glue.OverlayReader.open;
Object.defineProperty(glue.OverlayReader, 'open', {
  value: function (...args) {
    if (!ready) return Promise.reject(notReady());
    return open.apply(this, args);
  },
  writable: true,
  configurable: true,
});

export const OverlayReader = glue.OverlayReader;
