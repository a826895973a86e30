-- An emulation of Db2 LUW's SQL Replication capture (ASN) on PostgreSQL, for Sluice's db2 tests:
-- the control tables Debezium's Db2 connector reads (ASNCDC.IBMSNAP_REGISTER, IBMSNAP_UOW), the
-- Db2 catalog views it joins (SYSCAT.TABLES, SYSCAT.COLUMNS, SYSIBM.SYSDUMMY1), and Debezium's
-- management routines (ASNCDC.ASNCDCSERVICES, ASNCDC.ADDTABLE, ASNCDC.REMOVETABLE). Where the
-- real capture program reads the log asynchronously, triggers write the change-data (CD)
-- tables here: one row per row state (an update is a 'D' row then an 'I' row, as
-- CHG_UPD_TO_DEL_INS='Y' registers it), all rows of a transaction under one commit sequence.
-- Writers of captured tables are serialised from their first captured change to their commit
-- (an advisory lock), so commit sequences follow commit order. LSNs are 16-byte bytea values,
-- compared as Db2 compares VARCHAR(16) FOR BIT DATA. Unquoted names fold to lower case here
-- and to upper case on Db2: the control tables are lower case; the CD tables, like the captured
-- tables the tests create, are quoted upper case names, as Db2 stores them.

CREATE SCHEMA asncdc;
CREATE SCHEMA "ASNCDC";
CREATE SCHEMA syscat;
CREATE SCHEMA sysibm;

CREATE TABLE sysibm.sysdummy1 (ibmreqd char(1));
INSERT INTO sysibm.sysdummy1 VALUES ('Y');

-- The log: one sequence for every LSN (commit and intent sequences).
CREATE SEQUENCE asncdc.lsn;

CREATE FUNCTION asncdc.lsn_bytes(n bigint) RETURNS bytea
  LANGUAGE sql IMMUTABLE AS $$ SELECT decode(lpad(to_hex(n), 32, '0'), 'hex') $$;

-- Db2 has MAX and MIN over VARCHAR FOR BIT DATA; PostgreSQL has none over bytea.
CREATE FUNCTION asncdc.bytea_larger(a bytea, b bytea) RETURNS bytea LANGUAGE sql IMMUTABLE STRICT
  AS $$ SELECT CASE WHEN b > a THEN b ELSE a END $$;
CREATE FUNCTION asncdc.bytea_smaller(a bytea, b bytea) RETURNS bytea LANGUAGE sql IMMUTABLE STRICT
  AS $$ SELECT CASE WHEN b < a THEN b ELSE a END $$;
CREATE AGGREGATE public.max(bytea) (SFUNC = asncdc.bytea_larger, STYPE = bytea);
CREATE AGGREGATE public.min(bytea) (SFUNC = asncdc.bytea_smaller, STYPE = bytea);

CREATE TABLE asncdc.ibmsnap_register (
  source_owner varchar(128) NOT NULL,
  source_table varchar(128) NOT NULL,
  source_view_qual smallint NOT NULL DEFAULT 0,
  global_record char(1) NOT NULL DEFAULT 'N',
  source_structure smallint NOT NULL DEFAULT 1,
  source_condensed char(1) NOT NULL DEFAULT 'Y',
  source_complete char(1) NOT NULL DEFAULT 'Y',
  cd_owner varchar(128),
  cd_table varchar(128),
  phys_change_owner varchar(128),
  phys_change_table varchar(128),
  cd_old_synchpoint bytea,
  cd_new_synchpoint bytea,
  disable_refresh smallint NOT NULL DEFAULT 0,
  synchpoint bytea,
  synchtime timestamp,
  state char(1) NOT NULL DEFAULT 'I',
  chg_upd_to_del_ins char(1) NOT NULL DEFAULT 'Y',
  chgonly char(1) NOT NULL DEFAULT 'N',
  recapture char(1) NOT NULL DEFAULT 'Y',
  PRIMARY KEY (source_owner, source_table, source_view_qual)
);

CREATE TABLE asncdc.ibmsnap_uow (
  ibmsnap_uowid bytea NOT NULL,
  ibmsnap_commitseq bytea NOT NULL PRIMARY KEY,
  ibmsnap_logmarker timestamp NOT NULL,
  ibmsnap_authid varchar(128),
  ibmsnap_rejcode char(1) NOT NULL DEFAULT '0',
  ibmsnap_applyqual char(18)
);

-- SYSCAT.TABLES: a table's id is (TBSPACEID, TABLEID); here from its oid. CARD, the rows
-- RUNSTATS counted (-1 before it ran): PostgreSQL's statistics (reltuples, -1 until the table
-- is analyzed; ADMIN_CMD's RUNSTATS below analyzes it).
CREATE VIEW syscat.tables AS
  SELECT n.nspname::varchar(128) AS tabschema, c.relname::varchar(128) AS tabname,
         CASE c.relkind WHEN 'v' THEN 'V' ELSE 'T' END::char(1) AS type,
         (2 + (c.oid::bigint / 65536) % 1000)::smallint AS tbspaceid,
         (c.oid::bigint % 65536 % 32768)::smallint AS tableid,
         (CASE WHEN c.relkind = 'v' OR c.reltuples < 0 THEN -1 ELSE c.reltuples END)::bigint AS card
  FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
  WHERE c.relkind IN ('r', 'p', 'v');

-- SYSPROC.ADMIN_CMD, its RUNSTATS ON TABLE schema.table (unquoted names in upper case, as Db2
-- folds them): the table's statistics collected.
CREATE SCHEMA sysproc;
CREATE PROCEDURE sysproc.admin_cmd(command varchar) LANGUAGE plpgsql AS $$
DECLARE
  m text[];
  part text;
  parts text[] := '{}';
BEGIN
  m := regexp_match(command, '^\s*RUNSTATS\s+ON\s+TABLE\s+((?:"[^"]+"|[^\s."]+)(?:\.(?:"[^"]+"|[^\s."]+))?)', 'i');
  IF m IS NULL THEN
    RAISE EXCEPTION 'ADMIN_CMD: only RUNSTATS ON TABLE is emulated: %', command;
  END IF;
  FOR part IN SELECT x[1] FROM regexp_matches(m[1], '("[^"]+"|[^."]+)', 'g') AS x LOOP
    parts := parts || CASE WHEN part LIKE '"%"' THEN substr(part, 2, length(part) - 2) ELSE upper(part) END;
  END LOOP;
  IF array_length(parts, 1) = 1 THEN
    EXECUTE format('ANALYZE %I', parts[1]);
  ELSE
    EXECUTE format('ANALYZE %I.%I', parts[1], parts[2]);
  END IF;
END $$;

-- SYSCAT.COLUMNS with Db2's type names: PostgreSQL's types, and domains named after Db2's
-- types PostgreSQL lacks (DECFLOAT, GRAPHIC, VARGRAPHIC, DBCLOB, CLOB, BLOB, VARBINARY).
CREATE DOMAIN public.decfloat AS numeric;
CREATE DOMAIN public.graphic AS char(16);
CREATE DOMAIN public.vargraphic AS varchar;
CREATE DOMAIN public.dbclob AS text;
CREATE DOMAIN public.clob AS text;
CREATE DOMAIN public.blob AS bytea;
CREATE DOMAIN public.varbinary AS bytea;

CREATE VIEW syscat.columns AS
  SELECT n.nspname::varchar(128) AS tabschema, c.relname::varchar(128) AS tabname,
         a.attname::varchar(128) AS colname, (a.attnum - 1)::smallint AS colno,
         (CASE WHEN t.typtype = 'd' THEN upper(t.typname)
               ELSE CASE t.typname
                 WHEN 'int2' THEN 'SMALLINT' WHEN 'int4' THEN 'INTEGER' WHEN 'int8' THEN 'BIGINT'
                 WHEN 'float4' THEN 'REAL' WHEN 'float8' THEN 'DOUBLE' WHEN 'numeric' THEN 'DECIMAL'
                 WHEN 'bpchar' THEN 'CHARACTER' WHEN 'varchar' THEN 'VARCHAR' WHEN 'text' THEN 'CLOB'
                 WHEN 'bytea' THEN 'BLOB' WHEN 'bool' THEN 'BOOLEAN' WHEN 'date' THEN 'DATE'
                 WHEN 'time' THEN 'TIME' WHEN 'timestamp' THEN 'TIMESTAMP' WHEN 'xml' THEN 'XML'
                 ELSE upper(t.typname) END
          END)::varchar(128) AS typename,
         (CASE WHEN bt.typname = 'numeric' AND a.atttypmod > 0 THEN ((a.atttypmod - 4) >> 16)
               WHEN bt.typname = 'numeric' AND t.typtype = 'd' THEN 16
               WHEN bt.typname = 'numeric' THEN 31
               WHEN bt.typname IN ('bpchar', 'varchar') AND coalesce(nullif(a.atttypmod, -1), t.typtypmod) > 0
                 THEN coalesce(nullif(a.atttypmod, -1), t.typtypmod) - 4
               WHEN bt.typname = 'int2' THEN 2 WHEN bt.typname = 'int4' THEN 4 WHEN bt.typname = 'int8' THEN 8
               WHEN bt.typname = 'float4' THEN 4 WHEN bt.typname = 'float8' THEN 8
               WHEN bt.typname = 'date' THEN 4 WHEN bt.typname = 'time' THEN 3 WHEN bt.typname = 'timestamp' THEN 10
               ELSE 0 END)::integer AS length,
         (CASE WHEN bt.typname = 'numeric' AND a.atttypmod > 0 THEN ((a.atttypmod - 4) & 65535)
               WHEN bt.typname = 'timestamp' THEN coalesce(nullif(a.atttypmod, -1), 6)
               ELSE 0 END)::smallint AS scale,
         (CASE WHEN a.attnotnull THEN 'N' ELSE 'Y' END)::char(1) AS nulls,
         (SELECT k.n FROM pg_index i, unnest(i.indkey) WITH ORDINALITY AS k(attnum, n)
            WHERE i.indrelid = c.oid AND i.indisprimary AND k.attnum = a.attnum)::smallint AS keyseq,
         pg_get_expr(d.adbin, d.adrelid)::varchar(254) AS "default"
  FROM pg_attribute a
  JOIN pg_class c ON c.oid = a.attrelid
  JOIN pg_namespace n ON n.oid = c.relnamespace
  JOIN pg_type t ON t.oid = a.atttypid
  JOIN pg_type bt ON bt.oid = CASE WHEN t.typtype = 'd' THEN t.typbasetype ELSE t.oid END
  LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
  WHERE a.attnum > 0 AND NOT a.attisdropped AND c.relkind IN ('r', 'p', 'v');

-- Db2 for z/OS's catalog (`db2.platform: ZOS`): SYSIBM.SYSTABLES (CREATOR, NAME, DBID, OBID)
-- and SYSIBM.SYSCOLUMNS (1-based COLNO, COLTYPE in z/OS's eight-character names, KEYSEQ 0 off
-- the key), over the same catalog as SYSCAT's.
CREATE VIEW sysibm.systables AS
  SELECT tabschema AS creator, tabname AS name, type, tbspaceid AS dbid, tableid AS obid,
         card::double precision AS cardf
  FROM syscat.tables;

CREATE VIEW sysibm.syscolumns AS
  SELECT tabschema AS tbcreator, tabname AS tbname, colname AS name, (colno + 1)::smallint AS colno,
         (CASE typename WHEN 'TIMESTAMP' THEN 'TIMESTMP' WHEN 'VARGRAPHIC' THEN 'VARG'
            WHEN 'VARBINARY' THEN 'VARBIN' WHEN 'CHARACTER' THEN 'CHAR' WHEN 'REAL' THEN 'FLOAT'
            WHEN 'DOUBLE' THEN 'FLOAT' ELSE typename END)::char(8) AS coltype,
         length, scale, nulls, coalesce(keyseq, 0)::smallint AS keyseq
  FROM syscat.columns;

-- The capture trigger: the row's state(s) into the CD table named by the trigger's argument,
-- under the transaction's commit sequence; an update as one 'U' row (its after image) when
-- the registration says CHG_UPD_TO_DEL_INS = 'N'.
CREATE FUNCTION asncdc.capture() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  cd text := TG_ARGV[0];
  tx text := txid_current()::text;
  held text := current_setting('asncdc.tx', true);
  commitseq bytea;
  marker timestamp;
BEGIN
  IF held IS NULL OR held = '' OR split_part(held, '|', 1) <> tx THEN
    PERFORM pg_advisory_xact_lock(31337);
    commitseq := asncdc.lsn_bytes(nextval('asncdc.lsn'));
    marker := clock_timestamp()::timestamp;
    PERFORM set_config('asncdc.tx', tx || '|' || encode(commitseq, 'hex') || '|' || marker::text, true);
    INSERT INTO asncdc.ibmsnap_uow (ibmsnap_uowid, ibmsnap_commitseq, ibmsnap_logmarker, ibmsnap_authid)
      VALUES (substr(commitseq, 7, 10), commitseq, marker, session_user);
    UPDATE asncdc.ibmsnap_register SET synchpoint = commitseq, synchtime = marker
      WHERE global_record = 'Y';
  ELSE
    commitseq := decode(split_part(held, '|', 2), 'hex');
    marker := split_part(held, '|', 3)::timestamp;
  END IF;
  IF TG_OP = 'UPDATE' AND EXISTS (SELECT 1 FROM asncdc.ibmsnap_register r
      WHERE format('%I.%I', r.cd_owner, r.cd_table) = cd AND r.chg_upd_to_del_ins = 'N') THEN
    EXECUTE format('INSERT INTO %s SELECT $1, $2, $3, $4, ($5).*', cd)
      USING commitseq, asncdc.lsn_bytes(nextval('asncdc.lsn')), 'U', marker, NEW;
    RETURN NULL;
  END IF;
  IF TG_OP IN ('DELETE', 'UPDATE') THEN
    EXECUTE format('INSERT INTO %s SELECT $1, $2, $3, $4, ($5).*', cd)
      USING commitseq, asncdc.lsn_bytes(nextval('asncdc.lsn')), 'D', marker, OLD;
  END IF;
  IF TG_OP IN ('INSERT', 'UPDATE') THEN
    EXECUTE format('INSERT INTO %s SELECT $1, $2, $3, $4, ($5).*', cd)
      USING commitseq, asncdc.lsn_bytes(nextval('asncdc.lsn')), 'I', marker, NEW;
  END IF;
  RETURN NULL;
END $$;

-- Debezium's ASNCDC.ASNCDCSERVICES('start', 'asncdc'): the capture program's global record
-- (its SYNCHPOINT is the highest LSN captured). 'status' tells whether it runs.
CREATE FUNCTION asncdc.asncdcservices(command varchar, service varchar) RETURNS varchar
  LANGUAGE plpgsql AS $$
BEGIN
  IF lower(command) = 'start' THEN
    -- An LSN taken under the writers' lock: no writer's commit sequence can be below it and
    -- still uncommitted once it is visible.
    PERFORM pg_advisory_xact_lock(31337);
    INSERT INTO asncdc.ibmsnap_register (source_owner, source_table, global_record, synchpoint, synchtime, state)
      VALUES ('', '', 'Y', asncdc.lsn_bytes(nextval('asncdc.lsn')), now()::timestamp, 'A')
      ON CONFLICT DO NOTHING;
    RETURN 'asncap started';
  ELSIF lower(command) = 'status' THEN
    RETURN CASE WHEN EXISTS (SELECT 1 FROM asncdc.ibmsnap_register WHERE global_record = 'Y')
      THEN 'asncap is running' ELSE 'asncap is not running' END;
  END IF;
  RAISE EXCEPTION 'asncdcservices: unknown command %', command;
END $$;

-- Debezium's CALL ASNCDC.ADDTABLE('MYSCHEMA', 'MYTABLE'): the CD table ASNCDC.CDC_<schema>_<table>
-- (IBMSNAP_COMMITSEQ, IBMSNAP_INTENTSEQ, IBMSNAP_OPERATION, IBMSNAP_LOGMARKER, then the table's
-- columns), its registration (changes from CD_NEW_SYNCHPOINT on) and the capture triggers.
CREATE PROCEDURE asncdc.addtable(tableschema varchar, tablename varchar) LANGUAGE plpgsql AS $$
DECLARE
  cd_name text := 'CDC_' || tableschema || '_' || tablename;
  cd text := format('%I.%I', 'ASNCDC', cd_name);
  src text := format('%I.%I', tableschema, tablename);
BEGIN
  PERFORM pg_advisory_xact_lock(31337);
  EXECUTE format('CREATE TABLE %s (ibmsnap_commitseq bytea NOT NULL, ibmsnap_intentseq bytea NOT NULL, '
    'ibmsnap_operation char(1) NOT NULL, ibmsnap_logmarker timestamp NOT NULL, LIKE %s)', cd, src);
  EXECUTE format('CREATE INDEX ON %s (ibmsnap_commitseq, ibmsnap_intentseq)', cd);
  INSERT INTO asncdc.ibmsnap_register (source_owner, source_table, cd_owner, cd_table,
      phys_change_owner, phys_change_table, cd_new_synchpoint, state)
    VALUES (tableschema, tablename, 'ASNCDC', cd_name, 'ASNCDC', cd_name,
      asncdc.lsn_bytes(nextval('asncdc.lsn')), 'A');
  EXECUTE format('CREATE TRIGGER asncdc_capture AFTER INSERT OR UPDATE OR DELETE ON %s '
    'FOR EACH ROW EXECUTE FUNCTION asncdc.capture(%L)', src, cd);
END $$;

-- Debezium's CALL ASNCDC.REMOVETABLE('MYSCHEMA', 'MYTABLE').
CREATE PROCEDURE asncdc.removetable(tableschema varchar, tablename varchar) LANGUAGE plpgsql AS $$
DECLARE
  cd_name text := 'CDC_' || tableschema || '_' || tablename;
BEGIN
  EXECUTE format('DROP TRIGGER IF EXISTS asncdc_capture ON %I.%I', tableschema, tablename);
  DELETE FROM asncdc.ibmsnap_register WHERE source_owner = tableschema AND source_table = tablename;
  EXECUTE format('DROP TABLE IF EXISTS %I.%I', 'ASNCDC', cd_name);
END $$;
