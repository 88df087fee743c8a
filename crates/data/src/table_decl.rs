//! What a schema file declares about the tables of a SQL query (`dpml sql`): per table, the
//! privacy unit, whether the table is public, the contribution bounds, and per column the
//! bounds, the public key set, the foreign key and (for CSV files) the type. Declared, never read from the records, like
//! the rest of the schema ([`crate::Schema`]).
//!
//! ```toml
//! [tables.visits]
//! privacy_unit = "user_id"          # default: each row is one unit
//! max_groups_per_unit = 5           # L0: at most this many groups per unit in one aggregate
//! max_rows_per_unit_per_group = 1   # L∞: a unit's rows in one group count as at most this many
//!
//! [[tables.visits.columns]]
//! name = "spend"
//! bounds = [0, 100]                 # every value is clamped into them
//! sum_bounds = [0, 300]             # optional: one unit's sum in one group is clamped into them
//!
//! [[tables.visits.columns]]
//! name = "day"
//! keys = [1, 2, 3, 4, 5, 6, 7]      # a public key set (or keys_file = "days.csv")
//!
//! [[tables.orders.columns]]
//! name = "o_custkey"
//! references = "customer.c_custkey" # a foreign key: carries the privacy unit
//! type = "integer"                  # a CSV column's type (integer, real, text, boolean, date,
//!                                   # timestamp); Parquet files carry their own
//!
//! [tables.regions]
//! public = true
//! ```
//!
//! This module checks each declaration on its own (ranges, key lists, names); how the tables
//! fit together (a foreign key's target, a unit reachable from every private table) is checked
//! by the SQL layer, which sees the whole query.

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::DataError;

/// Most keys a key set may list (a typo in a keys file must not exhaust memory).
pub const MAX_KEYS: usize = 1_000_000;

/// One value of a public key set: a number, a string or a boolean, as the file writes it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum KeyValue {
    /// A boolean key.
    Bool(bool),
    /// An integer key.
    Int(i64),
    /// A real key.
    Float(f64),
    /// A text key (also dates such as `"1995-03-15"`, cast to the column's type).
    Text(String),
}

impl fmt::Display for KeyValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeyValue::Bool(b) => write!(f, "{b}"),
            KeyValue::Int(i) => write!(f, "{i}"),
            KeyValue::Float(v) => write!(f, "{v}"),
            KeyValue::Text(s) => f.write_str(s),
        }
    }
}

/// `[lo, hi]`: exactly two numbers (a tuple would take the first two of a longer list and
/// drop the rest unseen).
fn two_numbers<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<(f64, f64)>, D::Error> {
    use serde::de::Error;
    match <Vec<f64>>::deserialize(d)?.as_slice() {
        &[lo, hi] => Ok(Some((lo, hi))),
        other => Err(D::Error::custom(format!(
            "bounds are two numbers [lo, hi], not {}",
            other.len()
        ))),
    }
}

/// The `tables` of a schema file by name, a name declared twice refused: JSON allows a key
/// twice, and a map would keep the last declaration unseen (TOML refuses it itself).
pub(crate) fn distinct_tables<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<BTreeMap<String, TableDecl>, D::Error> {
    struct Tables;
    impl<'de> serde::de::Visitor<'de> for Tables {
        type Value = BTreeMap<String, TableDecl>;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("tables by name")
        }

        fn visit_map<A: serde::de::MapAccess<'de>>(
            self,
            mut map: A,
        ) -> Result<Self::Value, A::Error> {
            use serde::de::Error;
            let mut tables = BTreeMap::new();
            while let Some((name, decl)) = map.next_entry::<String, TableDecl>()? {
                if tables.contains_key(&name) {
                    return Err(A::Error::custom(format!(
                        "table {name:?} is declared twice"
                    )));
                }
                tables.insert(name, decl);
            }
            Ok(tables)
        }
    }
    d.deserialize_map(Tables)
}

/// What is declared about one column.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ColumnDecl {
    /// The column's name in the table.
    pub name: String,
    /// Every value is clamped into `[lo, hi]` before it is aggregated.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "two_numbers"
    )]
    pub bounds: Option<(f64, f64)>,
    /// One unit's total in one group is clamped into `[lo, hi]` (the per-unit clamp of a sum).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "two_numbers"
    )]
    pub sum_bounds: Option<(f64, f64)>,
    /// The public key set of a GROUP BY on this column: these groups are released, empty ones
    /// too, and rows with another value are dropped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keys: Option<Vec<KeyValue>>,
    /// A file with the key set, one key a line (relative to the schema file); read into
    /// `keys` when the schema is loaded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keys_file: Option<String>,
    /// A foreign key, `"table.column"`: every value names one row of that table, whose
    /// privacy unit this row shares. The column referenced must be unique in its table.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub references: Option<String>,
    /// The column's type in a CSV file, which holds none (Parquet files carry their own).
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub column_type: Option<ColumnType>,
}

/// The declared type of a CSV column. A private CSV table's types are declared, never read
/// from its rows: which rows are there is private, and a type told from them would let one
/// unit's value decide whether a query is answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum ColumnType {
    /// A 64-bit integer (`integer`, `bigint`, `int`).
    Integer,
    /// A 64-bit float (`real`, `double`, `float`).
    Real,
    /// Text (`text`, `varchar`, `string`).
    Text,
    /// `boolean` (`bool`).
    Boolean,
    /// A calendar date, `YYYY-MM-DD` (`date`).
    Date,
    /// A date and time, `YYYY-MM-DD HH:MM:SS[.ffffff]` (`timestamp`).
    Timestamp,
}

impl TryFrom<String> for ColumnType {
    type Error = String;

    /// The type's name or its SQL spelling, in any case.
    fn try_from(name: String) -> Result<Self, String> {
        Ok(match name.to_ascii_lowercase().as_str() {
            "integer" | "bigint" | "int" => Self::Integer,
            "real" | "double" | "float" => Self::Real,
            "text" | "varchar" | "string" => Self::Text,
            "boolean" | "bool" => Self::Boolean,
            "date" => Self::Date,
            "timestamp" => Self::Timestamp,
            _ => {
                return Err(format!(
                    "type {name:?} is not one of integer, real, text, boolean, date, timestamp"
                ));
            }
        })
    }
}

impl From<ColumnType> for String {
    fn from(t: ColumnType) -> String {
        format!("{t:?}").to_ascii_lowercase()
    }
}

/// What is declared about one table.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TableDecl {
    /// The column naming the privacy unit (a person): neighbouring databases differ in all
    /// rows of one unit. Without it (and without a foreign key that carries a unit) each row
    /// is its own unit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub privacy_unit: Option<String>,
    /// A public table (a dimension table): not protected, released freely.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub public: bool,
    /// L0: at most this many groups of one aggregate take a unit's rows (default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_groups_per_unit: Option<u64>,
    /// L∞: a unit's rows in one group count as at most this many rows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_rows_per_unit_per_group: Option<u64>,
    /// Column declarations.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub columns: Vec<ColumnDecl>,
}

impl TableDecl {
    /// The declaration of column `name`, if any.
    pub fn column(&self, name: &str) -> Option<&ColumnDecl> {
        self.columns.iter().find(|c| c.name == name)
    }
}

/// Checks every table's declarations and reads each `keys_file` (relative to `base`, the
/// schema file's folder) into the column's `keys`.
///
/// # Errors
/// [`DataError::Schema`] naming the table, the column and what is wrong.
pub(crate) fn check_tables(
    tables: &mut BTreeMap<String, TableDecl>,
    base: Option<&Path>,
) -> Result<(), DataError> {
    for (name, table) in tables.iter_mut() {
        check_table(name, table, base)?;
    }
    Ok(())
}

fn check_table(name: &str, t: &mut TableDecl, base: Option<&Path>) -> Result<(), DataError> {
    let err = |what: String| DataError::Schema(format!("table {name:?}: {what}"));
    if name.is_empty() {
        return Err(err("a table needs a name".into()));
    }
    if t.public
        && (t.privacy_unit.is_some()
            || t.max_groups_per_unit.is_some()
            || t.max_rows_per_unit_per_group.is_some())
    {
        return Err(err(
            "a public table has no privacy unit or contribution bounds".into(),
        ));
    }
    for (what, v) in [
        ("max_groups_per_unit", t.max_groups_per_unit),
        ("max_rows_per_unit_per_group", t.max_rows_per_unit_per_group),
    ] {
        if v == Some(0) {
            return Err(err(format!("{what} must be at least 1")));
        }
    }
    let mut seen: Vec<&str> = Vec::new();
    for c in &t.columns {
        if seen.contains(&c.name.as_str()) {
            return Err(err(format!("column {:?} is declared twice", c.name)));
        }
        seen.push(&c.name);
    }
    for c in &mut t.columns {
        let err = |what: String| err(format!("column {:?}: {what}", c.name));
        for (what, range) in [("bounds", c.bounds), ("sum_bounds", c.sum_bounds)] {
            if let Some((lo, hi)) = range
                && !(lo.is_finite() && hi.is_finite() && lo < hi)
            {
                return Err(err(format!(
                    "{what} must be finite with lo < hi, got [{lo}, {hi}]"
                )));
            }
        }
        if let Some(r) = &c.references {
            match r.split_once('.') {
                Some((tbl, col)) if !tbl.is_empty() && !col.is_empty() && !col.contains('.') => {}
                _ => {
                    return Err(err(format!(
                        "references must be \"table.column\", got {r:?}"
                    )));
                }
            }
        }
        if let Some(file) = c.keys_file.take() {
            if c.keys.is_some() {
                return Err(err("declare keys or keys_file, not both".into()));
            }
            let path = base.map_or_else(|| Path::new(&file).to_path_buf(), |b| b.join(&file));
            c.keys = Some(read_keys_file(&path).map_err(|e| err(e.to_string()))?);
            c.keys_file = Some(file);
        }
        if let Some(keys) = &c.keys {
            check_keys(keys).map_err(err)?;
        }
    }
    Ok(())
}

/// A key set: not empty, at most [`MAX_KEYS`], no key twice, no non-finite number.
fn check_keys(keys: &[KeyValue]) -> Result<(), String> {
    if keys.is_empty() || keys.len() > MAX_KEYS {
        return Err(format!(
            "a key set lists between 1 and {MAX_KEYS} keys, got {}",
            keys.len()
        ));
    }
    if let Some(KeyValue::Float(v)) = keys
        .iter()
        .find(|k| matches!(k, KeyValue::Float(v) if !v.is_finite()))
    {
        return Err(format!("keys must be finite, got {v}"));
    }
    let mut text: Vec<String> = keys.iter().map(KeyValue::to_string).collect();
    text.sort();
    match text.windows(2).find(|w| w[0] == w[1]) {
        Some(w) => Err(format!("key {:?} is listed twice", w[0])),
        None => Ok(()),
    }
}

/// One key a line (blank lines skipped), as text: cast to the column's type when used.
fn read_keys_file(path: &Path) -> Result<Vec<KeyValue>, DataError> {
    // A key is rarely longer than a few dozen bytes; refuse a file that cannot be a key list.
    const MAX_BYTES: u64 = 256 * MAX_KEYS as u64;
    let text = crate::read_text(path, "a key list", MAX_BYTES)?;
    // A byte-order mark (as some editors save) is no part of the first key.
    let text = text.strip_prefix('\u{feff}').unwrap_or(&text);
    Ok(text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(|l| KeyValue::Text(l.to_string()))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(toml_text: &str) -> Result<BTreeMap<String, TableDecl>, String> {
        #[derive(Deserialize)]
        struct File {
            tables: BTreeMap<String, TableDecl>,
        }
        let mut f: File = toml::from_str(toml_text).map_err(|e| e.to_string())?;
        check_tables(&mut f.tables, None).map_err(|e| e.to_string())?;
        Ok(f.tables)
    }

    #[test]
    fn the_issue_example_parses() {
        let t = parse(
            "[tables.visits]\nprivacy_unit = \"user_id\"\nmax_groups_per_unit = 5\n\
             max_rows_per_unit_per_group = 1\n[[tables.visits.columns]]\nname = \"spend\"\n\
             bounds = [0, 100]\n[[tables.visits.columns]]\nname = \"day\"\n\
             keys = [1, 2, 3]\n[tables.regions]\npublic = true\n",
        )
        .unwrap();
        let v = &t["visits"];
        assert_eq!(v.privacy_unit.as_deref(), Some("user_id"));
        assert_eq!(v.max_groups_per_unit, Some(5));
        assert_eq!(v.column("spend").unwrap().bounds, Some((0.0, 100.0)));
        assert_eq!(
            v.column("day").unwrap().keys,
            Some(vec![KeyValue::Int(1), KeyValue::Int(2), KeyValue::Int(3)])
        );
        assert!(t["regions"].public);
    }

    #[test]
    fn bad_declarations_are_named() {
        let cases = [
            (
                "[tables.t]\npublic = true\nprivacy_unit = \"u\"\n",
                "public table has no privacy unit",
            ),
            ("[tables.t]\nmax_groups_per_unit = 0\n", "at least 1"),
            (
                "[[tables.t.columns]]\nname = \"x\"\nbounds = [2, 1]\n",
                "column \"x\": bounds must be finite",
            ),
            (
                "[[tables.t.columns]]\nname = \"x\"\nbounds = [0, 50, 100]\n",
                "two numbers [lo, hi], not 3",
            ),
            (
                "[[tables.t.columns]]\nname = \"x\"\nkeys = []\n",
                "between 1",
            ),
            (
                "[[tables.t.columns]]\nname = \"x\"\nkeys = [1, 1]\n",
                "listed twice",
            ),
            (
                "[[tables.t.columns]]\nname = \"x\"\nreferences = \"nodot\"\n",
                "table.column",
            ),
            (
                "[[tables.t.columns]]\nname = \"x\"\n[[tables.t.columns]]\nname = \"x\"\n",
                "declared twice",
            ),
            ("[tables.t]\ncolour = 1\n", "colour"),
            (
                "[[tables.t.columns]]\nname = \"x\"\ntype = \"money\"\n",
                "type \"money\" is not one of integer",
            ),
        ];
        for (text, want) in cases {
            let msg = parse(text).unwrap_err();
            assert!(msg.contains(want), "{text}: {msg}");
        }
    }

    #[test]
    fn a_type_is_named_as_in_sql_in_any_case() {
        for (name, want) in [
            ("BIGINT", ColumnType::Integer),
            ("Double", ColumnType::Real),
            ("varchar", ColumnType::Text),
            ("date", ColumnType::Date),
        ] {
            let t = parse(&format!(
                "[[tables.t.columns]]\nname = \"x\"\ntype = \"{name}\"\n"
            ))
            .unwrap();
            assert_eq!(t["t"].columns[0].column_type, Some(want), "{name}");
        }
        assert_eq!(String::from(ColumnType::Timestamp), "timestamp");
    }

    #[test]
    fn a_keys_file_is_read_relative_to_the_schema() {
        let dir = tempfile::tempdir().unwrap();
        // Saved with a byte-order mark, which is no part of the first key.
        std::fs::write(dir.path().join("days.csv"), "\u{feff}1\n2\n\n3\n").unwrap();
        #[derive(Deserialize)]
        struct File {
            tables: BTreeMap<String, TableDecl>,
        }
        let mut f: File =
            toml::from_str("[[tables.v.columns]]\nname = \"day\"\nkeys_file = \"days.csv\"\n")
                .unwrap();
        check_tables(&mut f.tables, Some(dir.path())).unwrap();
        let keys = f.tables["v"].columns[0].keys.clone().unwrap();
        assert_eq!(keys.len(), 3);
        assert_eq!(keys[0], KeyValue::Text("1".into()));
        assert_eq!(keys[2], KeyValue::Text("3".into()));
        let mut missing: File =
            toml::from_str("[[tables.v.columns]]\nname = \"day\"\nkeys_file = \"nope.csv\"\n")
                .unwrap();
        let msg = check_tables(&mut missing.tables, Some(dir.path()))
            .unwrap_err()
            .to_string();
        assert!(msg.contains("nope.csv"), "{msg}");
        // A folder (and so a FIFO: both are not regular files) is refused by name.
        std::fs::create_dir(dir.path().join("keys")).unwrap();
        let mut folder: File =
            toml::from_str("[[tables.v.columns]]\nname = \"day\"\nkeys_file = \"keys\"\n").unwrap();
        let msg = check_tables(&mut folder.tables, Some(dir.path()))
            .unwrap_err()
            .to_string();
        assert!(msg.contains("not a regular file"), "{msg}");
    }
}
