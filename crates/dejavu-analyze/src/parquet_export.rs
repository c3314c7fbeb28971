//! `dejavu export --format parquet`: one row per syscall record, for DuckDB, Polars,
//! pandas and Spark. Columns documented in docs/trace-format.md ("Parquet export"); rows
//! go out in groups of `ROW_GROUP` so memory stays bounded on any trace size.

use crate::export::{ExportError, ExportStats};
use crate::names::errno_name;
use dejavu_trace::{stat_known, Record, Syscall, TraceReader};
use parquet::basic::Compression;
use parquet::data_type::{ByteArray, ByteArrayType, Int32Type, Int64Type};
use parquet::file::properties::WriterProperties;
use parquet::file::writer::SerializedFileWriter;
use parquet::schema::parser::parse_message_type;
use std::io::{Read, Write};
use std::sync::Arc;

/// Rows per row group.
const ROW_GROUP: usize = 256 * 1024;

/// The schema; keep docs/trace-format.md in step.
const SCHEMA: &str = "message dejavu_syscall {
    required int64 ts_ns;
    required int64 dur_ns;
    required int32 pid;
    required int32 tid;
    required binary syscall (UTF8);
    required int64 ret;
    optional binary errno (UTF8);
    optional int32 fd;
    optional binary path (UTF8);
    optional binary path2 (UTF8);
    optional int64 count;
    optional int64 offset;
    required int64 flags;
    required int32 mode;
    optional int64 stat_dev;
    optional int64 stat_ino;
    optional int64 stat_size;
    optional int64 stat_mtime_ns;
    optional int32 stack_id;
    required int32 ev;
}";

/// One column's values for the current row group (`None` is a null).
enum Col {
    I64(Vec<Option<i64>>),
    I32(Vec<Option<i32>>),
    Str(Vec<Option<ByteArray>>),
}

impl Col {
    fn clear(&mut self) {
        match self {
            Col::I64(v) => v.clear(),
            Col::I32(v) => v.clear(),
            Col::Str(v) => v.clear(),
        }
    }
}

fn perr(e: parquet::errors::ParquetError) -> ExportError {
    ExportError::Write(std::io::Error::other(e))
}

/// Writes the syscall records of `reader` to `out` as one Parquet file.
pub fn export_parquet<R: Read, W: Write + Send>(
    reader: &mut TraceReader<R>,
    out: W,
) -> Result<ExportStats, ExportError> {
    let schema = Arc::new(parse_message_type(SCHEMA).map_err(perr)?);
    let props = Arc::new(
        WriterProperties::builder()
            .set_compression(Compression::SNAPPY)
            .set_created_by(format!("dejavu {}", reader.meta().producer))
            .build(),
    );
    let mut w = SerializedFileWriter::new(out, schema, props).map_err(perr)?;
    let mut cols: Vec<Col> = vec![
        Col::I64(Vec::new()), // ts_ns
        Col::I64(Vec::new()), // dur_ns
        Col::I32(Vec::new()), // pid
        Col::I32(Vec::new()), // tid
        Col::Str(Vec::new()), // syscall
        Col::I64(Vec::new()), // ret
        Col::Str(Vec::new()), // errno
        Col::I32(Vec::new()), // fd
        Col::Str(Vec::new()), // path
        Col::Str(Vec::new()), // path2
        Col::I64(Vec::new()), // count
        Col::I64(Vec::new()), // offset
        Col::I64(Vec::new()), // flags
        Col::I32(Vec::new()), // mode
        Col::I64(Vec::new()), // stat_dev
        Col::I64(Vec::new()), // stat_ino
        Col::I64(Vec::new()), // stat_size
        Col::I64(Vec::new()), // stat_mtime_ns
        Col::I32(Vec::new()), // stack_id
        Col::I32(Vec::new()), // ev
    ];
    let mut stats = ExportStats::default();
    let mut rows = 0usize;
    let mut failure = None;
    loop {
        let rec = match reader.next_record() {
            Ok(Some(r)) => r,
            Ok(None) => break,
            Err(e) => {
                // Keep what was read: the file stays readable, the command fails.
                failure = Some(e);
                break;
            }
        };
        stats.records += 1;
        if let Record::Syscall(c) = rec {
            push(&mut cols, &c, reader);
            rows += 1;
            stats.lines += 1;
            if rows == ROW_GROUP {
                flush(&mut w, &mut cols)?;
                rows = 0;
            }
        }
    }
    if rows > 0 {
        flush(&mut w, &mut cols)?;
    }
    stats.truncated = reader.truncation().is_some();
    w.close().map_err(perr)?;
    match failure {
        Some(e) => Err(ExportError::Trace(e)),
        None => Ok(stats),
    }
}

fn push<R: Read>(cols: &mut [Col], c: &Syscall, r: &TraceReader<R>) {
    let s = |id: Option<dejavu_trace::StrId>| id.map(|i| ByteArray::from(r.str(i).to_vec()));
    let st = c.stat.map(|id| r.stat(id));
    let known = |bit: u8| st.filter(|s| s.known & bit != 0);
    for (i, col) in cols.iter_mut().enumerate() {
        match (i, col) {
            (0, Col::I64(v)) => v.push(Some(c.ts as i64)),
            (1, Col::I64(v)) => v.push(Some(c.dur as i64)),
            (2, Col::I32(v)) => v.push(Some(c.pid as i32)),
            (3, Col::I32(v)) => v.push(Some(c.tid as i32)),
            (4, Col::Str(v)) => v.push(Some(ByteArray::from(c.sys.name()))),
            (5, Col::I64(v)) => v.push(Some(c.ret)),
            (6, Col::Str(v)) => v.push(
                (c.ret < 0)
                    .then(|| errno_name(-c.ret as i32))
                    .flatten()
                    .map(ByteArray::from),
            ),
            (7, Col::I32(v)) => v.push(c.fd),
            (8, Col::Str(v)) => v.push(s(c.path)),
            (9, Col::Str(v)) => v.push(s(c.path2)),
            (10, Col::I64(v)) => v.push((c.count > 0).then_some(c.count as i64)),
            (11, Col::I64(v)) => v.push(c.offset),
            (12, Col::I64(v)) => v.push(Some(c.flags as i64)),
            (13, Col::I32(v)) => v.push(Some(c.mode as i32)),
            (14, Col::I64(v)) => v.push(known(stat_known::IDENTITY).map(|s| s.dev as i64)),
            (15, Col::I64(v)) => v.push(known(stat_known::IDENTITY).map(|s| s.ino as i64)),
            (16, Col::I64(v)) => v.push(known(stat_known::SIZE).map(|s| s.size)),
            (17, Col::I64(v)) => v.push(known(stat_known::MTIME).map(|s| s.mtime_ns)),
            (18, Col::I32(v)) => v.push(c.stack.map(|s| s.0 as i32)),
            (19, Col::I32(v)) => v.push(Some(c.ev as i32)),
            _ => {}
        }
    }
}

fn flush<W: Write + Send>(
    w: &mut SerializedFileWriter<W>,
    cols: &mut [Col],
) -> Result<(), ExportError> {
    let mut rg = w.next_row_group().map_err(perr)?;
    for col in cols.iter_mut() {
        let mut cw = rg.next_column().map_err(perr)?.ok_or_else(|| {
            ExportError::Write(std::io::Error::other("parquet: fewer columns than values"))
        })?;
        let def = |present: &mut dyn Iterator<Item = bool>| -> Vec<i16> {
            present.map(|p| p as i16).collect()
        };
        // Required columns take no definition levels.
        match col {
            Col::I64(v) => {
                let t = cw.typed::<Int64Type>();
                let levels = (t.get_descriptor().max_def_level() > 0)
                    .then(|| def(&mut v.iter().map(Option::is_some)));
                let vals: Vec<i64> = v.iter().flatten().copied().collect();
                t.write_batch(&vals, levels.as_deref(), None)
                    .map_err(perr)?;
            }
            Col::I32(v) => {
                let t = cw.typed::<Int32Type>();
                let levels = (t.get_descriptor().max_def_level() > 0)
                    .then(|| def(&mut v.iter().map(Option::is_some)));
                let vals: Vec<i32> = v.iter().flatten().copied().collect();
                t.write_batch(&vals, levels.as_deref(), None)
                    .map_err(perr)?;
            }
            Col::Str(v) => {
                let t = cw.typed::<ByteArrayType>();
                let levels = (t.get_descriptor().max_def_level() > 0)
                    .then(|| def(&mut v.iter().map(Option::is_some)));
                let vals: Vec<ByteArray> = v.iter().flatten().cloned().collect();
                t.write_batch(&vals, levels.as_deref(), None)
                    .map_err(perr)?;
            }
        }
        cw.close().map_err(perr)?;
        col.clear();
    }
    rg.close().map_err(perr)?;
    Ok(())
}
