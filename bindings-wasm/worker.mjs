// skerry-wasm for Cloudflare Workers (workerd): the module is imported statically (wrangler
// bundles a `.wasm` import as a compiled module; compiling bytes at run time is refused in
// Workers) and initialised synchronously when this module loads.
import module from './pkg/web/skerry_wasm_bg.wasm';
import { initSync } from './web.mjs';

initSync({ module });

export { OverlayReader, initSync } from './web.mjs';
export { default } from './web.mjs';
