export * from './pkg/web/skerry_wasm.js';
export { default } from './pkg/web/skerry_wasm.js';
