//! Compression codecs of Puffin blobs and footers.
//!
//! Decompression is pure Rust on every target (`ruzstd`, `lz4_flex` frame format) and always
//! bounded: output beyond the caller's cap is a [`CodecError::TooLarge`], never an
//! allocation. Compression: LZ4 everywhere, zstd natively (the `zstd` crate; the wasm reader
//! never writes).

use std::fmt;
use std::io::Read;

use serde::{Deserialize, Serialize};

/// A Puffin compression codec, by its spec name.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Codec {
    #[default]
    None,
    /// LZ4 *frame* format (as the Puffin spec requires).
    Lz4,
    Zstd,
}

impl Codec {
    /// The spec name, or `None` for uncompressed (Puffin omits `compression-codec` then).
    pub fn spec_name(&self) -> Option<&'static str> {
        match self {
            Codec::None => None,
            Codec::Lz4 => Some("lz4"),
            Codec::Zstd => Some("zstd"),
        }
    }

    /// Parses a spec name; `None` means uncompressed.
    pub fn from_spec_name(name: Option<&str>) -> Result<Codec, CodecError> {
        match name {
            None => Ok(Codec::None),
            Some("lz4") => Ok(Codec::Lz4),
            Some("zstd") => Ok(Codec::Zstd),
            Some(other) => Err(CodecError::Unknown(other.chars().take(64).collect())),
        }
    }
}

impl fmt::Display for Codec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.spec_name().unwrap_or("none"))
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CodecError {
    #[error("unknown compression codec {0:?}")]
    Unknown(String),
    #[error("decompressed size exceeds the {max}-byte limit")]
    TooLarge { max: u64 },
    #[error("corrupt {codec} data: {message}")]
    Corrupt { codec: Codec, message: String },
    #[error("{0} compression is not available in this build")]
    Unavailable(Codec),
}

/// Compresses `data` with `codec`.
pub fn compress(codec: Codec, data: &[u8]) -> Result<Vec<u8>, CodecError> {
    match codec {
        Codec::None => Ok(data.to_vec()),
        Codec::Lz4 => {
            use std::io::Write;
            let mut enc =
                lz4_flex::frame::FrameEncoder::new(Vec::with_capacity(data.len() / 2 + 64));
            enc.write_all(data).map_err(|e| CodecError::Corrupt {
                codec,
                message: e.to_string(),
            })?;
            enc.finish().map_err(|e| CodecError::Corrupt {
                codec,
                message: e.to_string(),
            })
        }
        Codec::Zstd => zstd_compress(data),
    }
}

#[cfg(all(feature = "native", not(target_arch = "wasm32")))]
fn zstd_compress(data: &[u8]) -> Result<Vec<u8>, CodecError> {
    zstd::bulk::compress(data, 3).map_err(|e| CodecError::Corrupt {
        codec: Codec::Zstd,
        message: e.to_string(),
    })
}

#[cfg(not(all(feature = "native", not(target_arch = "wasm32"))))]
fn zstd_compress(_data: &[u8]) -> Result<Vec<u8>, CodecError> {
    Err(CodecError::Unavailable(Codec::Zstd))
}

/// Decompresses `data`, refusing output larger than `max_out` bytes.
pub fn decompress(codec: Codec, data: &[u8], max_out: u64) -> Result<Vec<u8>, CodecError> {
    let corrupt = |e: &dyn fmt::Display| CodecError::Corrupt {
        codec,
        message: e.to_string(),
    };
    match codec {
        Codec::None => {
            if data.len() as u64 > max_out {
                return Err(CodecError::TooLarge { max: max_out });
            }
            Ok(data.to_vec())
        }
        Codec::Lz4 => read_bounded(lz4_flex::frame::FrameDecoder::new(data), max_out, codec),
        Codec::Zstd => {
            let dec = ruzstd::decoding::StreamingDecoder::new(data).map_err(|e| corrupt(&e))?;
            read_bounded(dec, max_out, codec)
        }
    }
}

fn read_bounded<R: Read>(r: R, max_out: u64, codec: Codec) -> Result<Vec<u8>, CodecError> {
    let mut out = Vec::new();
    let mut limited = r.take(max_out.saturating_add(1));
    let mut buf = [0u8; 16 * 1024];
    loop {
        let n = limited.read(&mut buf).map_err(|e| CodecError::Corrupt {
            codec,
            message: e.to_string(),
        })?;
        if n == 0 {
            break;
        }
        out.extend_from_slice(&buf[..n]);
        if out.len() as u64 > max_out {
            return Err(CodecError::TooLarge { max: max_out });
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_bounds() {
        let data: Vec<u8> = (0..100_000u32)
            .flat_map(|i| (i % 251).to_le_bytes())
            .collect();
        for codec in [Codec::None, Codec::Lz4, Codec::Zstd] {
            let c = compress(codec, &data).unwrap();
            assert_eq!(
                decompress(codec, &c, data.len() as u64).unwrap(),
                data,
                "{codec}"
            );
            assert_eq!(
                decompress(codec, &c, data.len() as u64 - 1),
                Err(CodecError::TooLarge {
                    max: data.len() as u64 - 1
                })
            );
        }
        assert!(matches!(
            decompress(Codec::Zstd, b"not zstd at all", 1 << 20),
            Err(CodecError::Corrupt { .. })
        ));
        assert!(matches!(
            decompress(Codec::Lz4, b"not lz4 at all", 1 << 20),
            Err(CodecError::Corrupt { .. })
        ));
        assert!(matches!(
            Codec::from_spec_name(Some("brotli")),
            Err(CodecError::Unknown(_))
        ));
    }

    #[test]
    fn zstd_bomb_is_refused_without_allocating_it() {
        // 64 MiB of zeros compress to a few KiB; a 1 MiB cap must stop the decoder early.
        let bomb = zstd::bulk::compress(&vec![0u8; 64 << 20], 19).unwrap();
        assert!(bomb.len() < 64 * 1024);
        assert_eq!(
            decompress(Codec::Zstd, &bomb, 1 << 20),
            Err(CodecError::TooLarge { max: 1 << 20 })
        );
    }
}
