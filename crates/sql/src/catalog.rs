//! The declared facts the DP rewrite relies on, checked against the tables given: which tables
//! are public, how each private table reaches its privacy unit, the column bounds, key sets
//! and contribution bounds. Everything here comes from the schema file and the tables'
//! column names and types (Parquet footers, CSV headers), never from their rows.

use std::collections::BTreeMap;

use datafusion::arrow::datatypes::{DataType, SchemaRef};
use dpml_data::table_decl::{ColumnDecl, KeyValue, TableDecl};

use crate::error::{Result, SqlError};

/// How the rows of a table are tied to a privacy unit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UnitSource {
    /// A public table: no unit, released freely.
    Public,
    /// The unit's id is in this column.
    Column(String),
    /// Each row is its own unit (no privacy unit declared).
    Row,
    /// The unit is that of the row of `table` whose `key` equals this table's `column` (a
    /// declared foreign key).
    Via {
        /// The foreign-key column of this table.
        column: String,
        /// The table referenced.
        table: String,
        /// The referenced (unique) column.
        key: String,
    },
}

/// One table as the rewrite sees it.
#[derive(Debug, Clone)]
pub struct TableInfo {
    /// The table's name in the query.
    pub name: String,
    /// What the schema declares about it.
    pub decl: TableDecl,
    /// How its rows reach a privacy unit.
    pub unit: UnitSource,
    /// Its columns and types (from the file's own schema).
    pub arrow_schema: Option<SchemaRef>,
}

impl TableInfo {
    /// The declaration of column `name`, if any.
    pub fn column(&self, name: &str) -> Option<&ColumnDecl> {
        self.decl.column(name)
    }

    /// L0: how many groups of one aggregate may take a unit's rows (default 1).
    pub fn max_groups(&self) -> u64 {
        self.decl.max_groups_per_unit.unwrap_or(1)
    }
}

/// All tables of a query's schema, resolved.
#[derive(Debug, Clone, Default)]
pub struct Catalog {
    tables: BTreeMap<String, TableInfo>,
    /// Tables given (`--table`) but not declared in the schema: usable only to be refused by
    /// name.
    undeclared: BTreeMap<String, SchemaRef>,
}

/// Foreign keys are followed at most this deep (a cycle in the schema is refused).
const MAX_PATH: usize = 16;

impl Catalog {
    /// The catalog of the declared `tables`, checked against the `given` tables' columns.
    ///
    /// # Errors
    /// [`SqlError::Input`] for a declared column missing from its table, a foreign key to an
    /// undeclared table or column, a cycle of foreign keys, or a table with two foreign keys
    /// that both carry a unit.
    pub fn new(
        tables: &BTreeMap<String, TableDecl>,
        given: &[(String, SchemaRef)],
    ) -> Result<Catalog> {
        let schema_of = |name: &str| given.iter().find(|(n, _)| n == name).map(|(_, s)| s);
        for (name, decl) in tables {
            if let Some(schema) = schema_of(name) {
                check_columns(name, decl, schema)?;
                check_reference_types(name, decl, schema, &schema_of)?;
            }
        }
        let mut out = BTreeMap::new();
        for (name, decl) in tables {
            check_no_self_reference(name, decl)?;
            let unit = resolve_unit(name, tables, 0)?;
            out.insert(
                name.to_string(),
                TableInfo {
                    name: name.to_string(),
                    decl: decl.clone(),
                    unit,
                    arrow_schema: schema_of(name).cloned(),
                },
            );
        }
        let undeclared = given
            .iter()
            .filter(|(n, _)| !tables.contains_key(n))
            .map(|(n, s)| (n.clone(), s.clone()))
            .collect();
        Ok(Catalog {
            tables: out,
            undeclared,
        })
    }

    /// The table `name` as the query uses it.
    ///
    /// # Errors
    /// [`SqlError::Input`] when the schema does not declare it: its privacy unit is unknown.
    pub fn table(&self, name: &str) -> Result<&TableInfo> {
        self.tables.get(name).ok_or_else(|| {
            if name.ends_with(')') {
                // DataFusion names a table function's scan by its call.
                return SqlError::refused(
                    format!("the table function {name} in FROM"),
                    "no schema can declare its rows; for a series of numbers, write \
                     unnest(generate_series(…)) in SELECT",
                );
            }
            let given = if self.undeclared.contains_key(name) {
                "is given but not declared in the schema"
            } else {
                "is not declared in the schema"
            };
            SqlError::input(format!(
                "table {name} {given}: dpml cannot tell its privacy unit (declare \
                 [tables.{name}] with privacy_unit = \"COLUMN\" for a table with several rows \
                 per person, a foreign key that carries the unit, or public = true)"
            ))
        })
    }

    /// Whether a declared foreign key references `table.column`, which the schema thereby
    /// declares unique (at most one row per value).
    pub(crate) fn is_referenced(&self, table: &str, column: &str) -> bool {
        self.tables().any(|t| {
            t.decl.columns.iter().any(|c| {
                c.references
                    .as_deref()
                    .map(table_and_column)
                    .is_some_and(|(t, k)| t == table && k == column)
            })
        })
    }

    /// Whether `name` is declared public.
    pub fn is_public(&self, name: &str) -> bool {
        self.tables.get(name).is_some_and(|t| t.decl.public)
    }

    /// All declared tables.
    pub fn tables(&self) -> impl Iterator<Item = &TableInfo> {
        self.tables.values()
    }

    /// The declared bounds of `table.column`.
    pub fn bounds(&self, table: &str, column: &str) -> Option<(f64, f64)> {
        self.tables.get(table)?.column(column)?.bounds
    }

    /// The declared per-unit sum bounds of `table.column`.
    pub fn sum_bounds(&self, table: &str, column: &str) -> Option<(f64, f64)> {
        self.tables.get(table)?.column(column)?.sum_bounds
    }

    /// The declared public key set of `table.column`.
    pub fn keys(&self, table: &str, column: &str) -> Option<&[KeyValue]> {
        self.tables.get(table)?.column(column)?.keys.as_deref()
    }
}

/// Every declared column is in the table.
fn check_columns(name: &str, decl: &TableDecl, schema: &SchemaRef) -> Result<()> {
    let has = |c: &str| schema.fields().iter().any(|f| f.name() == c);
    let mut named: Vec<&str> = decl.columns.iter().map(|c| c.name.as_str()).collect();
    named.extend(decl.privacy_unit.as_deref());
    if let Some(missing) = named.into_iter().find(|c| !has(c)) {
        let columns: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
        return Err(SqlError::input(format!(
            "table {name}: column {missing} named in the schema is not in the table (its columns: {})",
            columns.join(", ")
        )));
    }
    Ok(())
}

/// Refuses a foreign key into its own table: it would declare the target column unique (one
/// row per value) with nothing to check it against, and so let a self-join on it run
/// unrefused, r rows of a unit becoming r² before bounding.
fn check_no_self_reference(name: &str, decl: &TableDecl) -> Result<()> {
    let own = decl.columns.iter().find_map(|c| {
        let target = c.references.as_deref()?;
        (table_and_column(target).0 == name).then_some((&c.name, target))
    });
    match own {
        Some((column, target)) => Err(SqlError::input(format!(
            "table {name}: column {column} references {target}, a column of its own table; a \
             foreign key joins two tables"
        ))),
        None => Ok(()),
    }
}

/// A foreign key's target `table.column` as its two names (the column empty when missing).
fn table_and_column(target: &str) -> (&str, &str) {
    target.split_once('.').unwrap_or((target, ""))
}

/// Refuses a foreign key whose column and target differ in kind (text and number, signed and
/// unsigned): joining them casts one to the other, which fails on some values, and the join
/// that carries the unit is dpml's own, so such a failure would tell whether a chosen row
/// exists.
fn check_reference_types<'a>(
    name: &str,
    decl: &TableDecl,
    schema: &SchemaRef,
    schema_of: &impl Fn(&str) -> Option<&'a SchemaRef>,
) -> Result<()> {
    fn kind(t: &DataType) -> String {
        match t {
            DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => "text".into(),
            DataType::Int8 | DataType::Int16 | DataType::Int32 | DataType::Int64 => {
                "integer".into()
            }
            DataType::UInt8 | DataType::UInt16 | DataType::UInt32 | DataType::UInt64 => {
                "unsigned integer".into()
            }
            DataType::Dictionary(_, values) => kind(values),
            other => other.to_string(),
        }
    }
    for c in &decl.columns {
        let Some(target) = &c.references else {
            continue;
        };
        let (table, key) = table_and_column(target);
        let (Ok(from), Some(Ok(to))) = (
            schema.field_with_name(&c.name),
            schema_of(table).map(|s| s.field_with_name(key)),
        ) else {
            continue;
        };
        let (a, b) = (kind(from.data_type()), kind(to.data_type()));
        if a != b {
            return Err(SqlError::input(format!(
                "table {name}: column {} ({a}) references {target} ({b}): joining them would \
                 cast one to the other, which fails on some values; declare the same type for \
                 both (type = \"integer\", \"text\", … in the schema)",
                c.name
            )));
        }
    }
    Ok(())
}

/// How table `name` reaches its unit: its own column, a foreign key to a table whose unit is
/// known, or each row.
fn resolve_unit(
    name: &str,
    tables: &BTreeMap<String, TableDecl>,
    depth: usize,
) -> Result<UnitSource> {
    if depth > MAX_PATH {
        return Err(SqlError::input(format!(
            "table {name}: the foreign keys that carry its privacy unit form a cycle or a \
             path longer than {MAX_PATH}"
        )));
    }
    let decl = &tables[name];
    if decl.public {
        return Ok(UnitSource::Public);
    }
    if let Some(unit) = &decl.privacy_unit {
        return Ok(UnitSource::Column(unit.clone()));
    }
    let mut found = Vec::new();
    for c in &decl.columns {
        let Some(target) = &c.references else {
            continue;
        };
        let (table, key) = table_and_column(target);
        let Some(tdecl) = tables.get(table) else {
            return Err(SqlError::input(format!(
                "table {name}: column {} references {target}, but table {table} is not declared \
                 in the schema",
                c.name
            )));
        };
        if tdecl.public {
            continue;
        }
        if tdecl.privacy_unit.as_deref() == Some(key) {
            // The foreign key's value is the unit's id itself.
            found.push(UnitSource::Column(c.name.clone()));
        } else {
            // Checks the target's own path (and finds cycles).
            resolve_unit(table, tables, depth + 1)?;
            found.push(UnitSource::Via {
                column: c.name.clone(),
                table: table.to_string(),
                key: key.to_string(),
            });
        }
    }
    match found.len() {
        0 => Ok(UnitSource::Row),
        1 => Ok(found.remove(0)),
        _ => Err(SqlError::input(format!(
            "table {name}: several foreign keys carry a privacy unit; declare its \
             privacy_unit column"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::datatypes::{DataType, Field, Schema};
    use std::sync::Arc;

    use crate::tests::decls;

    fn schema(cols: &[&str]) -> SchemaRef {
        Arc::new(Schema::new(
            cols.iter()
                .map(|c| Field::new(*c, DataType::Int64, true))
                .collect::<Vec<_>>(),
        ))
    }

    const TPCH: &str = "[tables.customer]\nprivacy_unit = \"c_custkey\"\n\
        [[tables.orders.columns]]\nname = \"o_custkey\"\nreferences = \"customer.c_custkey\"\n\
        [[tables.lineitem.columns]]\nname = \"l_orderkey\"\nreferences = \"orders.o_orderkey\"\n\
        [[tables.lineitem.columns]]\nname = \"l_suppkey\"\nreferences = \"supplier.s_suppkey\"\n\
        [tables.supplier]\npublic = true\n[tables.loose]\n";

    #[test]
    fn units_follow_the_foreign_keys() {
        let c = Catalog::new(&decls(TPCH), &[]).unwrap();
        let unit = |t: &str| c.table(t).unwrap().unit.clone();
        assert_eq!(unit("customer"), UnitSource::Column("c_custkey".into()));
        assert_eq!(unit("orders"), UnitSource::Column("o_custkey".into()));
        assert_eq!(
            unit("lineitem"),
            UnitSource::Via {
                column: "l_orderkey".into(),
                table: "orders".into(),
                key: "o_orderkey".into()
            }
        );
        assert_eq!(unit("supplier"), UnitSource::Public);
        assert_eq!(unit("loose"), UnitSource::Row);
        let msg = c.table("visits").unwrap_err().to_string();
        assert!(msg.contains("table visits is not declared"), "{msg}");
    }

    #[test]
    fn declarations_are_checked_against_the_tables() {
        let d = decls("[tables.v]\nprivacy_unit = \"user\"\n");
        let msg = Catalog::new(&d, &[("v".into(), schema(&["user_id"]))])
            .unwrap_err()
            .to_string();
        assert!(
            msg.contains("column user") && msg.contains("user_id"),
            "{msg}"
        );
        let cyc = decls(
            "[[tables.a.columns]]\nname = \"x\"\nreferences = \"b.y\"\n\
             [[tables.b.columns]]\nname = \"y\"\nreferences = \"a.x\"\n",
        );
        assert!(
            Catalog::new(&cyc, &[])
                .unwrap_err()
                .to_string()
                .contains("cycle")
        );
        // A foreign key into its own table, with or without a unit column.
        for own in [
            "[tables.v]\nprivacy_unit = \"u\"\n[[tables.v.columns]]\nname = \"u\"\nreferences = \"v.u\"\n",
            "[[tables.v.columns]]\nname = \"d\"\nreferences = \"v.e\"\n",
        ] {
            let msg = Catalog::new(&decls(own), &[]).unwrap_err().to_string();
            assert!(msg.contains("a column of its own table"), "{msg}");
        }
        let dangling = decls("[[tables.a.columns]]\nname = \"x\"\nreferences = \"z.y\"\n");
        assert!(
            Catalog::new(&dangling, &[])
                .unwrap_err()
                .to_string()
                .contains("table z is not declared")
        );
    }

    #[test]
    fn a_foreign_key_must_have_its_targets_kind() {
        let d = decls(
            "[tables.p]\nprivacy_unit = \"uid\"\n\
             [[tables.c.columns]]\nname = \"pid\"\nreferences = \"p.pid\"\n",
        );
        let text = Arc::new(Schema::new(vec![Field::new("pid", DataType::Utf8, true)]));
        let ints = schema(&["uid", "pid"]);
        let msg = Catalog::new(&d, &[("c".into(), text), ("p".into(), ints.clone())])
            .unwrap_err()
            .to_string();
        assert!(
            msg.contains("column pid (text) references p.pid (integer)"),
            "{msg}"
        );
        let narrow = Arc::new(Schema::new(vec![Field::new("pid", DataType::Int32, true)]));
        assert!(Catalog::new(&d, &[("c".into(), narrow), ("p".into(), ints)]).is_ok());
    }
}
