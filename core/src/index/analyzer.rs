//! The full-text analyzer: how a text value becomes terms, written down so a search, a build
//! and a scan of an unindexed file agree to the byte (`docs/fulltext-index.md`).
//!
//! 1. Unicode word segmentation (UAX #29 word boundaries, `unicode-segmentation`'s
//!    `unicode_word_indices`): runs of letters, digits and joiners; punctuation and spaces
//!    separate words and are dropped.
//! 2. Each word is lowercased (`str::to_lowercase`, full Unicode case mapping), and the Greek
//!    final sigma `ς` is folded to `σ` (so `ΣΟΦΟΣ`, `σοφος` and `σοφοσ` are one term).
//! 3. Words longer than [`MAX_TERM_BYTES`] bytes are dropped (they still take a position).
//! 4. `english` only: the stop words of [`STOP_WORDS`] are dropped (they still take a
//!    position, so a phrase keeps its gaps), the rest is stemmed with Snowball's English
//!    (Porter 2) stemmer (`rust-stemmers`).
//!
//! A word's position is its index among the words of the text (step 1), so positions count
//! dropped words. A document's length is the number of terms it keeps.

use rust_stemmers::{Algorithm, Stemmer};
use unicode_segmentation::UnicodeSegmentation;

/// Words longer than this (in UTF-8 bytes, after lowercasing) are not indexed.
pub const MAX_TERM_BYTES: usize = 64;

/// The English stop words of the `english` tokenizer (Lucene's classic list).
pub const STOP_WORDS: [&str; 33] = [
    "a", "an", "and", "are", "as", "at", "be", "but", "by", "for", "if", "in", "into", "is", "it",
    "no", "not", "of", "on", "or", "such", "that", "the", "their", "then", "there", "these",
    "they", "this", "to", "was", "will", "with",
];

/// UAX #29 word boundaries on ASCII text, as `unicode_words` finds them (tested against it):
/// calls `f(start, end)` for each word. Letters, digits and `_` join (WB5, WB8–WB10,
/// WB13a/b); `:`, `.` and `'` join letters (WB6/7); `,`, `;`, `.` and `'` join digits
/// (WB11/12); a segment without a letter or digit is not a word.
fn ascii_words(b: &[u8], mut f: impl FnMut(usize, usize)) {
    #[derive(PartialEq, Clone, Copy)]
    enum C {
        Letter,
        Digit,
        Under,
        Other,
    }
    let class = |c: u8| match c {
        b'a'..=b'z' | b'A'..=b'Z' => C::Letter,
        b'0'..=b'9' => C::Digit,
        b'_' => C::Under,
        _ => C::Other,
    };
    let mut i = 0usize;
    while i < b.len() {
        if class(b[i]) == C::Other {
            i += 1;
            continue;
        }
        let start = i;
        let mut alnum = class(b[i]) != C::Under;
        let mut last = class(b[i]);
        i += 1;
        while i < b.len() {
            let c = class(b[i]);
            if c != C::Other {
                alnum |= c != C::Under;
                last = c;
                i += 1;
                continue;
            }
            let next = b.get(i + 1).map(|x| class(*x));
            let joins = matches!(
                (last, b[i], next),
                (C::Letter, b':' | b'.' | b'\'', Some(C::Letter))
                    | (C::Digit, b',' | b';' | b'.' | b'\'', Some(C::Digit))
            );
            if !joins {
                break;
            }
            i += 2;
        }
        if alnum {
            f(start, i);
        }
    }
}

/// A tokenizer as index definitions name it.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Tokenizer {
    /// Words, lowercased.
    #[default]
    Simple,
    /// Words, lowercased, English stop words dropped, Porter 2 stemmed.
    English,
}

impl Tokenizer {
    pub fn parse(s: &str) -> crate::error::Result<Tokenizer> {
        match s {
            "simple" => Ok(Tokenizer::Simple),
            "english" => Ok(Tokenizer::English),
            other => Err(crate::error::Error::Invalid(format!(
                "unknown tokenizer {other:?} (tokenizers: simple, english)"
            ))),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Tokenizer::Simple => "simple",
            Tokenizer::English => "english",
        }
    }

    /// The byte a blob's directory records.
    pub fn id(self) -> u8 {
        match self {
            Tokenizer::Simple => 1,
            Tokenizer::English => 2,
        }
    }

    pub fn from_id(id: u8) -> Option<Tokenizer> {
        match id {
            1 => Some(Tokenizer::Simple),
            2 => Some(Tokenizer::English),
            _ => None,
        }
    }
}

/// Turns text into `(term, position)` pairs (see the module docs).
pub struct Analyzer {
    tokenizer: Tokenizer,
    stemmer: Option<Stemmer>,
    lower: String,
}

impl Analyzer {
    pub fn new(tokenizer: Tokenizer) -> Analyzer {
        Analyzer {
            tokenizer,
            stemmer: (tokenizer == Tokenizer::English).then(|| Stemmer::create(Algorithm::English)),
            lower: String::new(),
        }
    }

    pub fn tokenizer(&self) -> Tokenizer {
        self.tokenizer
    }

    /// Calls `f(term, position)` for every term of `text`, in order.
    pub fn analyze(&mut self, text: &str, mut f: impl FnMut(&str, u32)) {
        if text.is_ascii() {
            let mut i = 0usize;
            ascii_words(text.as_bytes(), |s, e| {
                self.term(&text[s..e], i, &mut f);
                i += 1;
            });
            return;
        }
        for (i, word) in text.unicode_words().enumerate() {
            self.term(word, i, &mut f);
        }
    }

    /// Step 2 onwards for the `i`-th word.
    #[inline]
    fn term(&mut self, word: &str, i: usize, f: &mut impl FnMut(&str, u32)) {
        {
            let pos = u32::try_from(i).unwrap_or(u32::MAX);
            self.lower.clear();
            if word.is_ascii() {
                self.lower.push_str(word);
                self.lower.make_ascii_lowercase();
            } else {
                // `str::to_lowercase` (a final capital sigma becomes `ς`), then `ς` folded to
                // `σ`: "ΣΟΦΟΣ", "Σοφος" and "σοφοσ" are one term whatever side spells them.
                for c in word.to_lowercase().chars() {
                    self.lower.push(if c == 'ς' { 'σ' } else { c });
                }
            }
            if self.lower.len() > MAX_TERM_BYTES {
                return;
            }
            match &self.stemmer {
                None => f(&self.lower, pos),
                Some(s) => {
                    if STOP_WORDS.contains(&self.lower.as_str()) {
                        return;
                    }
                    let stem = s.stem(&self.lower);
                    f(&stem, pos);
                }
            }
        }
    }

    /// The terms of `text` with their positions.
    pub fn terms(&mut self, text: &str) -> Vec<(String, u32)> {
        let mut out = Vec::new();
        self.analyze(text, |t, p| out.push((t.to_string(), p)));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn simple_lowercases_and_splits_on_unicode_boundaries() {
        let mut a = Analyzer::new(Tokenizer::Simple);
        let t = a.terms("Hello, WORLD! Grüße—Straße can't 3.5 日本語");
        let terms: Vec<&str> = t.iter().map(|(s, _)| s.as_str()).collect();
        assert_eq!(
            terms,
            ["hello", "world", "grüße", "straße", "can't", "3.5", "日", "本", "語"]
        );
        assert_eq!(t[3].1, 3);
    }

    /// Attack round 3, item 8: a capital final sigma and a small one are one term, so
    /// `search('ΣΟΦΟΣ')` finds a column's `σοφος` (and the reverse).
    #[test]
    fn greek_final_sigma_is_one_term_in_every_spelling() {
        let mut a = Analyzer::new(Tokenizer::Simple);
        for spelling in ["ΣΟΦΟΣ", "σοφος", "Σοφος", "σοφοσ", "ΣΟΦΟς"] {
            let t = a.terms(spelling);
            assert_eq!(t, vec![("σοφοσ".to_string(), 0)], "{spelling}");
        }
    }

    #[test]
    fn english_drops_stop_words_keeping_positions_and_stems() {
        let mut a = Analyzer::new(Tokenizer::English);
        let t = a.terms("The runners were running to the hills");
        assert_eq!(
            t,
            vec![
                ("runner".to_string(), 1),
                ("were".to_string(), 2),
                ("run".to_string(), 3),
                ("hill".to_string(), 6)
            ]
        );
    }

    /// The ASCII path finds exactly the words `unicode_words` finds, on strings made of the
    /// characters its rules are about.
    #[test]
    fn ascii_words_equal_unicode_words() {
        let alphabet = b"aZq09_.,;:'\" -\n\t!x";
        let mut state = 0x2545_F491_4F6C_DD1Du64;
        for _ in 0..200_000 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let len = (state % 12) as usize;
            let mut s = String::new();
            let mut x = state;
            for _ in 0..len {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                s.push(alphabet[((x >> 33) % alphabet.len() as u64) as usize] as char);
            }
            let mut fast = Vec::new();
            ascii_words(s.as_bytes(), |a, b| fast.push(&s[a..b]));
            let slow: Vec<&str> = s.unicode_words().collect();
            assert_eq!(fast, slow, "{s:?}");
        }
    }

    #[test]
    fn long_words_are_dropped() {
        let mut a = Analyzer::new(Tokenizer::Simple);
        let long = "x".repeat(MAX_TERM_BYTES + 1);
        let t = a.terms(&format!("a {long} b"));
        assert_eq!(t, vec![("a".to_string(), 0), ("b".to_string(), 2)]);
    }
}
