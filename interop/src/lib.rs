//! Interop tests live in tests/.
