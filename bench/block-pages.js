#!/usr/bin/env node
// Pages an applyWrites-shaped transaction writes to SQLite's log as the block table grows: ~400
// blocks inserted and ~200 deleted under the (did, cid) primary key the block store uses, at
// 20k and 2M blocks (the block counts of 10k- and 1M-record repositories). CIDs are hashes, so
// each change lands on its own leaf once the index outgrows the page cache: the count of pages
// written (and read cold, and copied again by the checkpoint) is what grows with the repository.
//
//   node bench/block-pages.js        (about 30 s; its databases live in the system temp directory)
import { randomBytes } from 'node:crypto'
import { mkdtempSync, rmSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import Database from 'better-sqlite3'

const did = 'did:plc:abcdefghijklmnopqrstuvwx'
const cid = () => 'bafyrei' + randomBytes(32).toString('base64url').toLowerCase().slice(0, 52)
const dir = mkdtempSync(path.join(os.tmpdir(), 'pds-block-pages-'))
try {
  for (const blocks of [20_000, 2_000_000]) {
    const db = new Database(path.join(dir, `${blocks}.db`))
    // as the server opens its store, with checkpoints left to this script
    db.pragma('journal_mode = WAL')
    db.pragma('synchronous = NORMAL')
    db.pragma('cache_size = -4096')
    db.pragma('wal_autocheckpoint = 0')
    db.exec(
      'create table repo_block (did text not null, cid text not null, repo_rev text not null, size integer not null, content blob not null, primary key (did, cid))',
    )
    const insert = db.prepare('insert into repo_block values (?, ?, ?, ?, ?)')
    const remove = db.prepare('delete from repo_block where did = ? and cid = ?')
    const keys = []
    const add = (n) => {
      for (let i = 0; i < n; i++) {
        const c = cid()
        keys.push(c)
        insert.run(did, c, 'rev', 200, randomBytes(200))
      }
    }
    const fill = db.transaction(add)
    for (let n = 0; n < blocks; n += 100_000) fill(Math.min(100_000, blocks - n))
    db.pragma('wal_checkpoint(TRUNCATE)')
    const call = db.transaction(() => {
      add(400)
      for (let i = 0; i < 200; i++) remove.run(did, keys[Math.floor(Math.random() * (keys.length - 400))])
    })
    const frames = []
    for (let round = 0; round < 10; round++) {
      call()
      // a PASSIVE checkpoint answers with the frames in the log; TRUNCATE then empties it
      frames.push(db.pragma('wal_checkpoint(PASSIVE)')[0].log)
      db.pragma('wal_checkpoint(TRUNCATE)')
    }
    frames.sort((a, b) => a - b)
    console.log(`${blocks} blocks: pages written per call, median ${frames[5]} (${frames[0]}-${frames[9]})`)
    db.close()
  }
} finally {
  rmSync(dir, { recursive: true, force: true })
}
