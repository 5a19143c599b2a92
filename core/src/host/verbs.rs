//! The read verbs as a host calls them: a method name and its arguments in, a shaped answer
//! out. Both bindings expose exactly these, parsed and answered here.

use super::{input, output, HostValue};
use crate::error::Result;
use crate::read::lookup::RowRef;
use crate::read::plan::Query;
use crate::read::snapshot::Snapshot;
use crate::values::{Value, ValueBound};

/// A read verb with its arguments parsed.
#[derive(Clone, Debug)]
pub enum ReadCall {
    Lookup {
        table: String,
        index: String,
        key: Vec<Value>,
    },
    LookupMany {
        table: String,
        index: String,
        keys: Vec<Vec<Value>>,
    },
    Range {
        table: String,
        index: String,
        lower: ValueBound,
        upper: ValueBound,
        reverse: bool,
        column: Option<String>,
    },
    Nulls {
        table: String,
        index: String,
        prefix: Vec<Option<Value>>,
        reverse: bool,
    },
    Locate {
        table: String,
        row_ids: Vec<u64>,
    },
    FetchRows {
        table: String,
        rows: Vec<RowRef>,
        columns: Vec<String>,
    },
    Query {
        table: String,
        query: Query,
    },
    Explain {
        table: String,
        query: Query,
    },
    Count {
        table: String,
        query: Query,
    },
    Search {
        table: String,
        search: crate::read::search::Search,
    },
    Nearest {
        table: String,
        nearest: crate::read::nearest::Nearest,
    },
}

/// What a read verb answers, and the `warning` events it raises.
#[derive(Debug)]
pub struct Answer {
    pub value: HostValue,
    pub warnings: Vec<HostValue>,
}

/// The read verbs as the bindings expose them, listed once: each entry is the Rust method
/// name, the host's name (what [`ReadCall::parse`] takes) and the argument names. A binding
/// passes its own stub-writing macro, `skerry_core::with_read_verbs!(its_macro)`, which gets
/// `name "hostName" (arg, …);` per verb; their TypeScript signatures and docs are
/// `ReadVerbs` in `host/host.d.ts`.
#[macro_export]
macro_rules! with_read_verbs {
    ($m:ident) => {
        $m! {
            lookup "lookup" (table, index, key);
            lookup_many "lookupMany" (table, index, keys);
            range "range" (table, index, lower, upper, options);
            nulls "nulls" (table, index, prefix, options);
            locate "locate" (table, row_ids);
            fetch_rows "fetchRows" (table, rows, columns);
            query "query" (table, options);
            count "count" (table, options);
            search "search" (table, options);
            nearest "nearest" (table, options);
            explain "explain" (table, options);
        }
    };
}

/// The names of the read verbs, as hosts spell them.
pub const READ_VERBS: [&str; 11] = [
    "lookup",
    "lookupMany",
    "range",
    "nulls",
    "locate",
    "fetchRows",
    "query",
    "explain",
    "count",
    "search",
    "nearest",
];

fn arg(args: &[HostValue], i: usize) -> &HostValue {
    args.get(i).unwrap_or(&HostValue::Undefined)
}

impl ReadCall {
    /// Parses `method(args…)`; `E_INVALID` for an unknown method or a malformed argument,
    /// `E_KEY` for a value that cannot be a key.
    pub fn parse(method: &str, args: &[HostValue]) -> Result<ReadCall> {
        let table = || input::text(arg(args, 0), method, "table");
        let index = || input::text(arg(args, 1), method, "index");
        Ok(match method {
            "lookup" => ReadCall::Lookup {
                table: table()?,
                index: index()?,
                key: input::key_values(arg(args, 2))?,
            },
            "lookupMany" => ReadCall::LookupMany {
                table: table()?,
                index: index()?,
                keys: input::keys(arg(args, 2), method)?,
            },
            "range" => {
                let (table, index) = (table()?, index()?);
                let (reverse, column) = input::range_options(arg(args, 4), method)?;
                ReadCall::Range {
                    lower: input::bound(arg(args, 2), method, "lower")?,
                    upper: input::bound(arg(args, 3), method, "upper")?,
                    table,
                    index,
                    reverse,
                    column,
                }
            }
            "nulls" => {
                let (table, index) = (table()?, index()?);
                let o = input::options(arg(args, 3), method)?;
                ReadCall::Nulls {
                    prefix: input::nulls_prefix(arg(args, 2), method)?,
                    reverse: input::flag(o, method, "reverse")?,
                    table,
                    index,
                }
            }
            "locate" => ReadCall::Locate {
                table: table()?,
                row_ids: input::row_ids(arg(args, 1), method)?,
            },
            "fetchRows" => ReadCall::FetchRows {
                table: table()?,
                rows: input::row_refs(arg(args, 1), method)?,
                columns: input::columns(arg(args, 2), method, "columns")?,
            },
            "query" => ReadCall::Query {
                table: table()?,
                query: input::query(arg(args, 1))?,
            },
            "explain" => ReadCall::Explain {
                table: table()?,
                query: input::query(arg(args, 1))?,
            },
            "count" => ReadCall::Count {
                table: table()?,
                query: input::count(arg(args, 1))?,
            },
            "search" => ReadCall::Search {
                table: table()?,
                search: input::search(arg(args, 1))?,
            },
            "nearest" => ReadCall::Nearest {
                table: table()?,
                nearest: input::nearest(arg(args, 1))?,
            },
            other => return Err(input::invalid(format!("unknown read verb {other}"))),
        })
    }

    /// Answers the call from `snapshot`. `clock` (milliseconds) times a query where the
    /// platform has no monotonic clock of its own (wasm).
    pub async fn run(self, snapshot: &Snapshot, clock: Option<fn() -> f64>) -> Result<Answer> {
        let plain = |value| Answer {
            value,
            warnings: vec![],
        };
        Ok(match self {
            ReadCall::Lookup { table, index, key } => plain(output::lookup_result(
                snapshot.lookup(&table, &index, &key).await?,
            )),
            ReadCall::LookupMany { table, index, keys } => plain(output::lookup_result(
                snapshot.lookup_many(&table, &index, &keys).await?,
            )),
            ReadCall::Range {
                table,
                index,
                lower,
                upper,
                reverse,
                column,
            } => plain(output::lookup_result(
                snapshot
                    .range(&table, &index, lower, upper, reverse, column.as_deref())
                    .await?,
            )),
            ReadCall::Nulls {
                table,
                index,
                prefix,
                reverse,
            } => plain(output::lookup_result(
                snapshot.nulls(&table, &index, &prefix, reverse).await?,
            )),
            ReadCall::Locate { table, row_ids } => {
                plain(output::locate_result(snapshot.locate(&table, &row_ids)?))
            }
            ReadCall::FetchRows {
                table,
                rows,
                columns,
            } => plain(output::batch(
                &snapshot.fetch(&table, &rows, &columns).await?,
            )?),
            ReadCall::Explain { table, query } => {
                plain(output::explain(snapshot.explain(&table, &query).await?))
            }
            ReadCall::Count { table, query } => {
                let t0 = clock.map(|c| c());
                let mut r = snapshot.count(&table, &query).await?;
                if let (Some(c), Some(t0)) = (clock, t0) {
                    r.stats.elapsed_ms = c() - t0;
                }
                let (value, warnings) = output::count_result(&table, r);
                Answer { value, warnings }
            }
            ReadCall::Search { table, search } => {
                let t0 = clock.map(|c| c());
                let mut r = snapshot.search(&table, &search).await?;
                if let (Some(c), Some(t0)) = (clock, t0) {
                    r.stats.elapsed_ms = c() - t0;
                }
                let (value, warnings) = output::search_result(&table, r)?;
                Answer { value, warnings }
            }
            ReadCall::Nearest { table, nearest } => {
                let t0 = clock.map(|c| c());
                let mut r = snapshot.nearest(&table, &nearest).await?;
                if let (Some(c), Some(t0)) = (clock, t0) {
                    r.stats.elapsed_ms = c() - t0;
                }
                let (value, warnings) = output::nearest_result(&table, r)?;
                Answer { value, warnings }
            }
            ReadCall::Query { table, query } => {
                let t0 = clock.map(|c| c());
                let mut r = snapshot.query(&table, &query).await?;
                if let (Some(c), Some(t0)) = (clock, t0) {
                    r.stats.elapsed_ms = c() - t0;
                }
                let (value, warnings) = output::query_result(&table, r)?;
                Answer { value, warnings }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    /// The bindings' verb list (`with_read_verbs!`) is the host's: every name parses, none is
    /// missing, and the TypeScript interface declares each.
    #[test]
    fn the_verb_list_is_the_hosts() {
        macro_rules! names {
            ($($name:ident $js:tt ($($arg:ident),*);)*) => {
                vec![$(($js, [$(stringify!($arg)),*].len())),*]
            };
        }
        let listed: Vec<(&str, usize)> = with_read_verbs!(names);
        let mut names: Vec<&str> = listed.iter().map(|(n, _)| *n).collect();
        names.sort();
        let mut host = super::READ_VERBS.to_vec();
        host.sort();
        assert_eq!(names, host);
        let dts = include_str!("host.d.ts");
        let verbs = dts
            .split("export interface ReadVerbs")
            .nth(1)
            .expect("ReadVerbs");
        for (n, args) in listed {
            let at = verbs
                .find(&format!("\n  {n}("))
                .unwrap_or_else(|| panic!("{n} in ReadVerbs"));
            let sig = &verbs[at + n.len() + 4..at + verbs[at..].find("): Promise<").unwrap()];
            // One TypeScript parameter per argument the binding passes (top-level commas).
            let mut depth = 0i32;
            let mut params = 1;
            for c in sig.chars() {
                match c {
                    '<' | '{' | '(' | '[' => depth += 1,
                    '>' | '}' | ')' | ']' => depth -= 1,
                    ',' if depth == 0 => params += 1,
                    _ => {}
                }
            }
            assert_eq!(params, args, "{n}: {sig}");
        }
    }
}
