//! The crate's layering, checked from its sources: modules reference each other (by
//! `crate::` paths, outside comments and test modules) without cycles, and each folder only
//! reaches the layers below it (`docs/architecture.md`):
//!
//! values → io → formats, index, datafile → read → host, admin
//!
//! `error` is the crate's sink type (it names every layer's error) and is left out.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

fn sources(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            sources(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// Module path (`read::plan`) → the crate modules it references.
fn graph() -> BTreeMap<String, BTreeSet<String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = vec![];
    sources(&src, &mut files);
    let mut raw = BTreeMap::new();
    for f in files {
        let rel = f.strip_prefix(&src).unwrap().with_extension("");
        let module = rel.to_string_lossy().replace("/mod", "").replace('/', "::");
        if module == "lib" || module == "error" {
            continue;
        }
        let text = std::fs::read_to_string(&f).unwrap();
        let code = text
            .split("#[cfg(test)]\nmod tests")
            .next()
            .unwrap()
            .lines()
            .filter(|l| !l.trim_start().starts_with("//"))
            .collect::<Vec<_>>()
            .join("\n");
        let mut refs = BTreeSet::new();
        for (i, _) in code.match_indices("crate::") {
            let path: String = code[i + 7..]
                .chars()
                .take_while(|c| c.is_ascii_lowercase() || *c == '_' || *c == ':')
                .collect();
            let parts: Vec<&str> = path.split("::").filter(|s| !s.is_empty()).collect();
            if let Some(first) = parts.first() {
                refs.insert(match parts.get(1) {
                    Some(second) => format!("{first}::{second}"),
                    None => first.to_string(),
                });
            }
        }
        raw.insert(module, refs);
    }
    let names: BTreeSet<String> = raw.keys().cloned().collect();
    raw.iter()
        .map(|(m, refs)| {
            let deps = refs
                .iter()
                .filter_map(|r| {
                    if names.contains(r) {
                        Some(r.clone())
                    } else {
                        let top = r.split("::").next().unwrap().to_string();
                        names.contains(&top).then_some(top)
                    }
                })
                .filter(|d| d != m && d != "error")
                .collect();
            (m.clone(), deps)
        })
        .collect()
}

#[test]
fn no_module_cycles() {
    let g = graph();
    assert!(g.len() > 20, "found only {} modules", g.len());
    // Depth-first search for a back edge.
    fn visit(
        m: &str,
        g: &BTreeMap<String, BTreeSet<String>>,
        state: &mut BTreeMap<String, u8>,
        stack: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        state.insert(m.to_string(), 1);
        stack.push(m.to_string());
        for d in g.get(m).into_iter().flatten() {
            match state.get(d.as_str()) {
                Some(1) => {
                    let at = stack.iter().position(|x| x == d).unwrap();
                    let mut cycle = stack[at..].to_vec();
                    cycle.push(d.clone());
                    return Some(cycle);
                }
                Some(_) => {}
                None => {
                    if let Some(c) = visit(d, g, state, stack) {
                        return Some(c);
                    }
                }
            }
        }
        stack.pop();
        state.insert(m.to_string(), 2);
        None
    }
    let mut state = BTreeMap::new();
    for m in g.keys() {
        if !state.contains_key(m.as_str()) {
            if let Some(c) = visit(m, &g, &mut state, &mut vec![]) {
                panic!("module cycle: {}", c.join(" → "));
            }
        }
    }
}

#[test]
fn folders_only_reach_lower_layers() {
    let layer = |top: &str| match top {
        "values" => 0,
        "io" => 1,
        "formats" | "index" | "datafile" => 2,
        "read" => 3,
        "host" | "admin" => 4,
        other => panic!("module {other} has no layer: add it to docs/architecture.md and here"),
    };
    for (m, deps) in graph() {
        let from = m.split("::").next().unwrap();
        for d in deps {
            let to = d.split("::").next().unwrap();
            assert!(
                from == to
                    || layer(to) < layer(from)
                    || (layer(to) == layer(from) && layer(from) < 4),
                "{m} (layer {}) reaches up to {d} (layer {})",
                layer(from),
                layer(to)
            );
        }
    }
}
