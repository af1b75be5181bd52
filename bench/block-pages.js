#!/usr/bin/env node
// Pages an applyWrites-shaped transaction writes to SQLite's log as a repository grows, on a
// model of the repository tables (the store's schema; 200 new records, their blocks, a third as
// many new tree nodes and the previous call's path of tree nodes removed per call), at 10k and 1M
// records. `before`: records also indexed by (did, CID), as the store was before migration 017;
// `now`: without that index, a value's records counted on its block row. CIDs are hashes, so a
// B-tree keyed by them takes one page per change once it outgrows the page cache: the count of
// pages written per call (each also read cold and copied again by the checkpoint) is what grows
// with the repository. Also prints the median time of the statements and of the checkpoint.
//
//   node bench/block-pages.js        (about 3 minutes; its databases live in the system temp directory)
import { randomBytes } from 'node:crypto'
import { mkdtempSync, rmSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import Database from 'better-sqlite3'

const did = 'did:plc:abcdefghijklmnopqrstuvwx'
const cid = () =>
  'bafyrei' +
  randomBytes(40)
    .toString('base64url')
    .toLowerCase()
    .replace(/[^a-z2-7]/g, 'a')
    .slice(0, 52)
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]
const dir = mkdtempSync(path.join(os.tmpdir(), 'pds-block-pages-'))
try {
  for (const layout of ['before', 'now']) {
    for (const records of [10_000, 1_000_000]) {
      const db = new Database(path.join(dir, `${layout}-${records}.db`))
      // as the server opens its store, with checkpoints left to this script
      db.pragma('journal_mode = WAL')
      db.pragma('synchronous = NORMAL')
      db.pragma('cache_size = -4096')
      db.pragma('wal_autocheckpoint = 0')
      db.exec(`
        create table repo_block (did text not null, cid text not null, repo_rev text not null, size integer not null,
          content blob not null, refs integer not null default 1, primary key (did, cid));
        create index repo_block_rev_idx on repo_block (did, repo_rev);
        create table record (uri text primary key, did text not null, collection text not null, rkey text not null,
          cid text not null, rev text not null, indexed_at text not null, value_json text);
        create unique index record_collection_rkey_uq on record (did, collection, rkey);
        ${layout === 'before' ? 'create index record_cid_idx on record (did, cid);' : ''}`)
      const insertBlock = db.prepare('insert into repo_block (did, cid, repo_rev, size, content) values (?, ?, ?, ?, ?)')
      const deleteBlock = db.prepare('delete from repo_block where did = ? and cid = ?')
      const insertRecord = db.prepare('insert into record values (?, ?, ?, ?, ?, ?, ?, ?)')
      let n = 0
      let revs = 0
      const treePath = []
      const call = (count) => {
        const rev = `rev${String(revs++).padStart(10, '0')}`
        for (let i = 0; i < count; i++) {
          const c = cid()
          const rkey = `t${String(n++).padStart(12, '0')}`
          const json = `{"$type":"app.bsky.feed.post","text":"post ${n}","createdAt":"2026-11-27T00:00:00.000Z"}`
          insertRecord.run(
            `at://${did}/app.bsky.feed.post/${rkey}`,
            did,
            'app.bsky.feed.post',
            rkey,
            c,
            rev,
            '2026-11-27T00:00:00.000Z',
            json,
          )
          insertBlock.run(did, c, rev, 120, randomBytes(120))
        }
        for (const c of treePath.splice(0)) deleteBlock.run(did, c)
        for (let i = 0; i < Math.ceil(count / 3); i++) {
          const c = cid()
          insertBlock.run(did, c, rev, 600, randomBytes(600))
          if (i < 12) treePath.push(c)
        }
      }
      const fill = db.transaction(() => {
        for (let i = 0; i < 100; i++) call(200)
      })
      while (n < records) fill()
      db.pragma('wal_checkpoint(TRUNCATE)')
      const one = db.transaction(() => call(200))
      const pages = []
      const sqlMs = []
      const checkpointMs = []
      for (let round = 0; round < 20; round++) {
        const t0 = performance.now()
        one()
        const t1 = performance.now()
        // a PASSIVE checkpoint answers with the frames in the log; TRUNCATE then empties it
        pages.push(db.pragma('wal_checkpoint(PASSIVE)')[0].log)
        checkpointMs.push(performance.now() - t1)
        sqlMs.push(t1 - t0)
        db.pragma('wal_checkpoint(TRUNCATE)')
      }
      console.log(
        `${layout} ${records} records: pages written per call, median ${median(pages)} (${Math.min(...pages)}-${Math.max(...pages)}); ` +
          `statements ${median(sqlMs).toFixed(1)} ms, checkpoint ${median(checkpointMs).toFixed(1)} ms`,
      )
      db.close()
    }
  }
} finally {
  rmSync(dir, { recursive: true, force: true })
}
