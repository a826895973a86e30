//! SQL Server's CDC procedures on the emulated store: `sys.sp_cdc_enable_db`,
//! `sys.sp_cdc_enable_table` (the change table, its rows in `cdc.change_tables` and
//! `cdc.captured_columns`, and the triggers that play the capture job's reading of the log),
//! `sys.sp_cdc_disable_table`, `sys.sp_cdc_help_change_data_capture`, `sys.sp_cdc_help_jobs`.

use std::collections::HashMap;

use rusqlite::types::Value;

use super::engine::{sql_err, Output, Session, CDC_SETUP};
use super::tsql::{quote, Tok};
use super::types::SqlType;

/// `@name = value` arguments (names lower-cased, without `@`).
fn arguments(t: &[Tok]) -> Result<HashMap<String, Value>, String> {
    let mut out = HashMap::new();
    let mut i = 0;
    while i < t.len() {
        match (&t[i], t.get(i + 1), t.get(i + 2)) {
            (Tok::Var(name), Some(Tok::Punct(eq)), Some(value)) if eq == "=" => {
                let value = match value {
                    Tok::Str(s) => Value::Text(s.clone()),
                    Tok::Num(n) => {
                        Value::Integer(n.parse().map_err(|_| format!("bad number {n}"))?)
                    }
                    Tok::Ident(w, false) if w.eq_ignore_ascii_case("NULL") => Value::Null,
                    Tok::Hex(h) => Value::Blob(
                        (0..h.len())
                            .step_by(2)
                            .map(|i| u8::from_str_radix(h.get(i..i + 2).unwrap_or("0"), 16))
                            .collect::<Result<Vec<u8>, _>>()
                            .map_err(|_| format!("bad binary 0x{h}"))?,
                    ),
                    other => return Err(format!("argument {name}: {other:?} is not emulated")),
                };
                out.insert(name.trim_start_matches('@').to_ascii_lowercase(), value);
                i += 3;
            }
            (Tok::Punct(c), ..) if c == "," => i += 1,
            (other, ..) => return Err(format!("procedure argument {other:?} is not emulated")),
        }
    }
    Ok(out)
}

fn text_arg(args: &HashMap<String, Value>, name: &str) -> Option<String> {
    match args.get(name) {
        Some(Value::Text(s)) => Some(s.clone()),
        _ => None,
    }
}

impl Session {
    /// `EXEC <procedure> <arguments>`.
    pub(super) fn procedure(&mut self, t: &[Tok]) -> Result<Output, String> {
        let mut i = 0;
        let mut name = String::new();
        while let Some(Tok::Ident(part, _)) = t.get(i) {
            name = part.to_ascii_lowercase();
            i += 1;
            if matches!(t.get(i), Some(Tok::Punct(p)) if p == ".") {
                i += 1;
            } else {
                break;
            }
        }
        let args = arguments(&t[i..])?;
        match name.as_str() {
            "sp_cdc_enable_db" => {
                self.conn.execute_batch(CDC_SETUP).map_err(sql_err)?;
                Ok(Output::Nothing)
            }
            "sp_cdc_enable_table" => self.enable_table(&args),
            "sp_cdc_disable_table" => self.disable_table(&args),
            "sp_cdc_cleanup_change_table" => self.cleanup(&args),
            "sp_cdc_help_change_data_capture" => {
                self.cdc_enabled()?;
                self.run_one(
                    "SELECT o.schema_name AS source_schema, o.name AS source_table, ct.capture_instance, \
                     ct.object_id, ct.source_object_id, ct.start_lsn, ct.end_lsn, ct.supports_net_changes, \
                     ct.has_drop_pending, ct.role_name, ct.index_name, ct.filegroup_name, ct.create_date \
                     FROM \"cdc.change_tables\" ct JOIN \"sys.objects\" o ON o.object_id = ct.source_object_id",
                )
            }
            "sp_cdc_help_jobs" => self.run_one(
                "SELECT 1 AS job_id, 'capture' AS job_type, 'cdc.emulated_capture' AS job_name, 500 AS maxtrans, \
                 10 AS maxscans, 1 AS continuous, 5 AS pollinginterval, 0 AS retention, 0 AS threshold",
            ),
            other => Err(format!("procedure {other} is not emulated")),
        }
    }

    fn run_one(&mut self, sql: &str) -> Result<Output, String> {
        let (mut outputs, error) = self.run(sql, &[]);
        match error {
            Some(e) => Err(e),
            None => outputs.pop().ok_or_else(|| "no result".to_string()),
        }
    }

    fn cdc_enabled(&self) -> Result<(), String> {
        let enabled: i64 = self
            .conn
            .query_row("SELECT is_cdc_enabled FROM \"sys.databases\"", [], |r| {
                r.get(0)
            })
            .map_err(sql_err)?;
        if enabled == 0 {
            return Err(format!(
                "This operation is not supported: the database '{}' is not enabled for Change Data Capture. \
                 Ensure that the correct database context is set, and retry the operation.",
                self.database
            ));
        }
        Ok(())
    }

    fn enable_table(&mut self, args: &HashMap<String, Value>) -> Result<Output, String> {
        self.cdc_enabled()?;
        let schema = text_arg(args, "source_schema").ok_or("@source_schema is required")?;
        let table = text_arg(args, "source_name").ok_or("@source_name is required")?;
        let instance =
            text_arg(args, "capture_instance").unwrap_or_else(|| format!("{schema}_{table}"));
        let full = format!("{schema}.{table}");
        let source_id: i64 = self
            .conn
            .query_row(
                "SELECT object_id FROM \"sys.objects\" WHERE schema_name = ?1 AND name = ?2",
                [&schema, &table],
                |r| r.get(0),
            )
            .map_err(|_| {
                format!("Source table '{full}' does not exist in the current database.")
            })?;
        let columns: Vec<(String, String)> = {
            let mut stmt = self
                .conn
                .prepare(&format!("PRAGMA table_info({})", quote(&full)))
                .map_err(sql_err)?;
            let rows = stmt
                .query_map([], |r| Ok((r.get::<_, String>(1)?, r.get::<_, String>(2)?)))
                .map_err(sql_err)?;
            rows.collect::<Result<_, _>>().map_err(sql_err)?
        };
        let chosen: Option<Vec<String>> = text_arg(args, "captured_column_list").map(|l| {
            l.split(',')
                .map(|c| c.trim().trim_matches(['[', ']']).to_string())
                .collect()
        });
        let columns: Vec<(String, String)> = columns
            .into_iter()
            .filter(|(c, _)| {
                chosen
                    .as_ref()
                    .is_none_or(|l| l.iter().any(|x| x.eq_ignore_ascii_case(c)))
            })
            .collect();
        let auto = !self.in_tx;
        if auto {
            self.conn.execute_batch("BEGIN").map_err(sql_err)?;
        }
        let result = self.create_capture_instance(&full, source_id, &instance, &columns, args);
        if auto {
            if result.is_ok() {
                self.conn.execute_batch("COMMIT").map_err(sql_err)?;
            } else {
                let _ = self.conn.execute_batch("ROLLBACK");
            }
        }
        result.map(|()| Output::Nothing)
    }

    fn create_capture_instance(
        &self,
        full: &str,
        source_id: i64,
        instance: &str,
        columns: &[(String, String)],
        args: &HashMap<String, Value>,
    ) -> Result<(), String> {
        let count: i64 = self
            .conn
            .query_row(
                "SELECT count(*) FROM \"cdc.change_tables\" WHERE source_object_id = ?1",
                [source_id],
                |r| r.get(0),
            )
            .map_err(sql_err)?;
        if count >= 2 {
            return Err(format!("Could not create a capture instance because the capture instance limit for source table '{full}' has been reached (two)."));
        }
        let ct = format!("cdc.{instance}_CT");
        let defs: Vec<String> = columns
            .iter()
            .map(|(c, ty)| format!("{} {ty}", quote(c)))
            .collect();
        self.conn
            .execute_batch(&format!(
                "CREATE TABLE {} (\"__$start_lsn\" binary(10), \"__$end_lsn\" binary(10), \"__$seqval\" binary(10), \
                 \"__$operation\" int, \"__$update_mask\" varbinary(128), {}, \"__$command_id\" int)",
                quote(&ct),
                defs.join(", ")
            ))
            .map_err(|e| format!("capture instance {instance}: {e}"))?;
        // SQL Server clusters a change table on its LSNs.
        self.conn
            .execute_batch(&format!(
                "CREATE INDEX {} ON {} (\"__$start_lsn\", \"__$command_id\", \"__$seqval\", \"__$operation\")",
                quote(&format!("emu_{instance}_lsn")),
                quote(&ct)
            ))
            .map_err(sql_err)?;
        self.conn
            .execute_batch("UPDATE emu_state SET next = next + 1")
            .map_err(sql_err)?;
        let next: i64 = self
            .conn
            .query_row("SELECT next FROM emu_state", [], |r| r.get(0))
            .map_err(sql_err)?;
        // The capture job maps the instance's start in `cdc.lsn_time_mapping` (an entry
        // without a transaction, tran_id 0x00), so the maximum LSN is at least its start.
        self.conn
            .execute(
                "INSERT INTO \"cdc.lsn_time_mapping\" VALUES (?1, strftime('%Y-%m-%d %H:%M:%f', 'now'), \
                 strftime('%Y-%m-%d %H:%M:%f', 'now'), X'00', ?1)",
                [super::engine::lsn(next)],
            )
            .map_err(sql_err)?;
        let object_id: i64 = self
            .conn
            .query_row("SELECT max(object_id) + 1 FROM \"sys.objects\"", [], |r| {
                r.get(0)
            })
            .map_err(sql_err)?;
        self.conn
            .execute(
                "INSERT INTO \"sys.objects\" VALUES (?1, 'cdc', ?2, 'U')",
                rusqlite::params![object_id, format!("{instance}_CT")],
            )
            .map_err(sql_err)?;
        self.conn
            .execute(
                "INSERT INTO \"cdc.change_tables\" VALUES (?1, 0, ?2, ?3, ?4, NULL, ?5, 0, ?6, NULL, NULL, \
                 strftime('%Y-%m-%d %H:%M:%f', 'now'), 0)",
                rusqlite::params![
                    object_id,
                    source_id,
                    instance,
                    super::engine::lsn(next),
                    i64::from(matches!(args.get("supports_net_changes"), Some(Value::Integer(1)))),
                    text_arg(args, "role_name"),
                ],
            )
            .map_err(sql_err)?;
        for (i, (c, ty)) in columns.iter().enumerate() {
            let ty = ty
                .to_ascii_lowercase()
                .replace("_text", "")
                .replace("(-1)", "(max)");
            self.conn
                .execute(
                    "INSERT INTO \"cdc.captured_columns\" VALUES (?1, ?2, ?3, ?4, ?3, 0)",
                    rusqlite::params![object_id, c, i as i64 + 1, ty],
                )
                .map_err(sql_err)?;
        }
        if columns.iter().any(|(_, ty)| SqlType::parse(ty).is_none()) {
            return Err(format!("a column type of {full} is not emulated"));
        }
        self.create_triggers(full, instance, &ct, columns)
    }

    /// The capture job's reading of the log, as triggers: each change takes the next sequence
    /// value; `commit` gives the transaction's changes their commit LSN.
    fn create_triggers(
        &self,
        full: &str,
        instance: &str,
        ct: &str,
        columns: &[(String, String)],
    ) -> Result<(), String> {
        let row = |image: &str| -> String {
            columns
                .iter()
                .map(|(c, _)| format!("{image}.{}", quote(c)))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let all = vec!["1"; columns.len()].join(", ");
        let changed = columns
            .iter()
            .map(|(c, _)| format!("OLD.{0} IS NOT NEW.{0}", quote(c)))
            .collect::<Vec<_>>()
            .join(", ");
        // SQL Server logs an update of a key column as a delete and an insert (operations 1
        // and 2 at one sequence value), other updates as operations 3 and 4.
        let keys: Vec<String> = {
            let mut stmt = self
                .conn
                .prepare(&format!("PRAGMA table_info({})", quote(full)))
                .map_err(sql_err)?;
            let rows = stmt
                .query_map([], |r| Ok((r.get::<_, String>(1)?, r.get::<_, i64>(5)?)))
                .map_err(sql_err)?;
            let all: Vec<(String, i64)> = rows.collect::<Result<_, _>>().map_err(sql_err)?;
            all.into_iter()
                .filter(|(_, pk)| *pk > 0)
                .map(|(c, _)| c)
                .collect()
        };
        let key_changed = if keys.is_empty() {
            "0".to_string()
        } else {
            keys.iter()
                .map(|c| format!("OLD.{0} IS NOT NEW.{0}", quote(c)))
                .collect::<Vec<_>>()
                .join(" OR ")
        };
        let step = "UPDATE emu_state SET next = next + 1, pending = pending + 1;";
        let seq = "emu_lsn((SELECT next FROM emu_state))";
        let (t, c) = (quote(full), quote(ct));
        let sql = format!(
            "CREATE TRIGGER {ins} AFTER INSERT ON {t} BEGIN {step} \
               INSERT INTO {c} VALUES (NULL, NULL, {seq}, 2, emu_mask({all}), {new}, 1); END;
             CREATE TRIGGER {del} AFTER DELETE ON {t} BEGIN {step} \
               INSERT INTO {c} VALUES (NULL, NULL, {seq}, 1, emu_mask({all}), {old}, 1); END;
             CREATE TRIGGER {upd} AFTER UPDATE ON {t} WHEN NOT ({key_changed}) BEGIN {step} \
               INSERT INTO {c} VALUES (NULL, NULL, {seq}, 3, emu_mask({changed}), {old}, 1); \
               INSERT INTO {c} VALUES (NULL, NULL, {seq}, 4, emu_mask({changed}), {new}, 1); END;
             CREATE TRIGGER {updk} AFTER UPDATE ON {t} WHEN {key_changed} BEGIN {step} \
               INSERT INTO {c} VALUES (NULL, NULL, {seq}, 1, emu_mask({all}), {old}, 1); \
               INSERT INTO {c} VALUES (NULL, NULL, {seq}, 2, emu_mask({all}), {new}, 1); END;",
            ins = quote(&format!("emu_{instance}_i")),
            del = quote(&format!("emu_{instance}_d")),
            upd = quote(&format!("emu_{instance}_u")),
            updk = quote(&format!("emu_{instance}_k")),
            new = row("NEW"),
            old = row("OLD"),
        );
        self.conn.execute_batch(&sql).map_err(sql_err)
    }

    /// `sys.sp_cdc_cleanup_change_table`: the capture instance's low-water mark moves up to
    /// `@low_water_mark` and its changes below it are deleted, as the cleanup job does.
    fn cleanup(&mut self, args: &HashMap<String, Value>) -> Result<Output, String> {
        let instance = text_arg(args, "capture_instance").ok_or("@capture_instance is required")?;
        let Some(Value::Blob(mark)) = args.get("low_water_mark") else {
            return Err("@low_water_mark (binary(10)) is required".into());
        };
        self.conn
            .execute(
                "UPDATE \"cdc.change_tables\" SET start_lsn = ?1 WHERE capture_instance = ?2 AND start_lsn < ?1",
                rusqlite::params![mark, instance],
            )
            .map_err(sql_err)?;
        self.conn
            .execute(
                &format!(
                    "DELETE FROM {} WHERE \"__$start_lsn\" < ?1",
                    quote(&format!("cdc.{instance}_CT"))
                ),
                [mark],
            )
            .map_err(sql_err)?;
        Ok(Output::Nothing)
    }

    fn disable_table(&mut self, args: &HashMap<String, Value>) -> Result<Output, String> {
        self.cdc_enabled()?;
        let schema = text_arg(args, "source_schema").ok_or("@source_schema is required")?;
        let table = text_arg(args, "source_name").ok_or("@source_name is required")?;
        let which = text_arg(args, "capture_instance").ok_or("@capture_instance is required")?;
        let instances: Vec<String> = {
            let mut stmt = self
                .conn
                .prepare(
                    "SELECT capture_instance FROM \"cdc.change_tables\" ct JOIN \"sys.objects\" o \
                     ON o.object_id = ct.source_object_id WHERE o.schema_name = ?1 AND o.name = ?2",
                )
                .map_err(sql_err)?;
            let rows = stmt
                .query_map([&schema, &table], |r| r.get::<_, String>(0))
                .map_err(sql_err)?;
            rows.collect::<Result<_, _>>().map_err(sql_err)?
        };
        for instance in instances {
            if !which.eq_ignore_ascii_case("all") && !which.eq_ignore_ascii_case(&instance) {
                continue;
            }
            let sql = format!(
                "DROP TRIGGER {}; DROP TRIGGER {}; DROP TRIGGER {}; DROP TRIGGER {}; DROP TABLE {};
                 DELETE FROM \"cdc.captured_columns\" WHERE object_id IN (SELECT object_id FROM \"cdc.change_tables\" WHERE capture_instance = '{i}');
                 DELETE FROM \"cdc.change_tables\" WHERE capture_instance = '{i}';
                 DELETE FROM \"sys.objects\" WHERE schema_name = 'cdc' AND name = '{i}_CT';",
                quote(&format!("emu_{instance}_i")),
                quote(&format!("emu_{instance}_d")),
                quote(&format!("emu_{instance}_u")),
                quote(&format!("emu_{instance}_k")),
                quote(&format!("cdc.{instance}_CT")),
                i = instance.replace('\'', "''"),
            );
            self.conn.execute_batch(&sql).map_err(sql_err)?;
        }
        Ok(Output::Nothing)
    }
}
