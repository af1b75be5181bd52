import { sql } from 'kysely'
import { afterAll, expect, it } from 'vitest'
import { loadConfig } from '../src/config.js'
import { openDb } from '../src/db/index.js'
import { describe, dropSchema, freePort, tempDir, testEnv } from './harness.js'

describe('store migrations', () => {
  const envs: Record<string, string>[] = []
  afterAll(async () => {
    for (const env of envs) await dropSchema(env)
  })

  it('migrates an empty store to the latest version, and a second start changes nothing', async () => {
    const env = await testEnv(await freePort(), tempDir())
    envs.push(env)
    const cfg = loadConfig(env).db
    const db = await openDb(cfg)
    // the store's own schema only: Kysely's introspection reads every schema of the database and
    // trips over other test files dropping theirs
    const names =
      db.dialect === 'postgres'
        ? (
            await sql<{
              name: string
            }>`select table_name as name from information_schema.tables where table_schema = current_schema()`.execute(db)
          ).rows.map((r) => r.name)
        : (await sql<{ name: string }>`select name from sqlite_master where type = 'table'`.execute(db)).rows.map((r) => r.name)
    const columns =
      db.dialect === 'postgres'
        ? (
            await sql<{
              name: string
            }>`select column_name as name from information_schema.columns where table_schema = current_schema() and table_name = 'account'`.execute(
              db,
            )
          ).rows.map((r) => r.name)
        : (await sql<{ name: string }>`select name from pragma_table_info('account')`.execute(db)).rows.map((r) => r.name)
    for (const t of ['account', 'refresh_token', 'plc_operation', 'signing_key', 'event']) expect(names).toContain(t)
    for (const t of ['app_password', 'email_token', 'invite_code', 'invite_code_use']) expect(names).toContain(t)
    for (const t of ['repo_root', 'repo_block', 'record', 'record_blob', 'blob']) expect(names).toContain(t)
    for (const t of ['space_repo', 'space_record', 'space_op', 'space_record_blob']) expect(names).toContain(t)
    for (const t of ['space_config', 'space_member', 'space_writer', 'space_notify']) expect(names).toContain(t)
    expect(columns).toEqual(
      expect.arrayContaining([
        'did',
        'handle',
        'email',
        'email_confirmed_at',
        'password_hash',
        'status',
        'migration_state',
        'credential_gen',
        'revoked_app_passwords',
      ]),
    )
    await db.destroy()

    const again = await openDb(cfg)
    const applied = await sql<{ name: string }>`select name from kysely_migration order by name`.execute(again)
    // each applied once, in order
    expect(applied.rows.map((r) => r.name)).toEqual([
      '001-init',
      '002-accounts',
      '003-repos',
      '004-oauth',
      '005-preferences',
      '006-migration',
      '007-credential-generation',
      '008-handle-reuse',
      '009-moderation',
      '012-devices',
      '013-second-factors',
      '014-revoked-grants',
      '015-sign-in-steps',
      '016-record-json',
      '017-block-refs',
      '018-challenge-expiry',
      '019-takedown-indexes',
      '020-sign-in-flow',
      '021-space-repos',
      '022-space-hosts',
    ])
    await again.destroy()
  })

  it('counts the records sharing each value when a store from before the count is upgraded', async () => {
    const env = await testEnv(await freePort(), tempDir())
    envs.push(env)
    const cfg = loadConfig(env).db
    const db = await openDb(cfg)
    // the store as it was before (no later migrations): no count, records found by CID through their own index
    await db.kysely.schema.alterTable('repo_block').dropColumn('refs').execute()
    await db.kysely.schema.createIndex('record_cid_idx').on('record').columns(['did', 'cid']).execute()
    await db.kysely.schema.dropIndex('webauthn_challenge_expires_idx').execute()
    await db.kysely.schema.dropIndex('account_takendown_idx').execute()
    await db.kysely.schema.dropIndex('record_takedown_idx').execute()
    await sql`delete from kysely_migration where name >= '017-block-refs'`.execute(db)
    // and without the columns of the later migrations, which run again in order
    for (const t of ['space_repo', 'space_record', 'space_op', 'space_record_blob']) await db.kysely.schema.dropTable(t).execute()
    for (const t of ['space_config', 'space_member', 'space_writer', 'space_notify']) await db.kysely.schema.dropTable(t).execute()
    for (const [table, column] of [
      ['device_account', 'credential_gen'],
      ['device_account', 'password_at'],
      ['sign_in_step', 'credential_gen'],
      ['sign_in_step', 'awaits'],
      ['sign_in_step', 'passkey_id'],
      ['passkey', 'confirmed_gen'],
    ] as const) {
      await db.kysely.schema.alterTable(table).dropColumn(column).execute()
    }
    const now = new Date().toISOString()
    const [a, b] = ['bafyreiaaaa', 'bafyreibbbb']
    const block = (did: string, cid: string) =>
      sql`insert into repo_block (did, cid, repo_rev, size, content) values (${did}, ${cid}, 'r', 1, ${new Uint8Array([1])})`
    for (const [did, cid] of [
      ['did:plc:one', a],
      ['did:plc:one', b],
      ['did:plc:two', a],
    ])
      await block(did, cid).execute(db)
    const records: [string, string, string][] = [
      ['did:plc:one', 'x', a],
      ['did:plc:one', 'y', a],
      ['did:plc:one', 'z', b],
      ['did:plc:two', 'x', a],
    ]
    for (const [did, rkey, cid] of records) {
      await db
        .insertInto('record')
        .values({ uri: `at://${did}/c.x/${rkey}`, did, collection: 'c.x', rkey, cid, rev: 'r', indexed_at: now })
        .execute()
    }
    await db.destroy()

    const again = await openDb(cfg)
    const refs = await again.selectFrom('repo_block').select(['did', 'cid', 'refs']).orderBy('did').orderBy('cid').execute()
    expect(refs).toEqual([
      { did: 'did:plc:one', cid: a, refs: 2 },
      { did: 'did:plc:one', cid: b, refs: 1 },
      { did: 'did:plc:two', cid: a, refs: 1 },
    ])
    await again.destroy()
  })

  it('gives events a global monotonic sequence', async () => {
    const env = await testEnv(await freePort(), tempDir())
    envs.push(env)
    const db = await openDb(loadConfig(env).db)
    const now = new Date().toISOString()
    const seqs: number[] = []
    for (let i = 0; i < 3; i++) {
      const r = await db
        .insertInto('event')
        .values({ type: 'identity', did: `did:plc:${i}`, payload: new Uint8Array([i]), sequenced_at: now })
        .returning('seq')
        .executeTakeFirstOrThrow()
      seqs.push(r.seq)
    }
    expect(seqs[1]).toBeGreaterThan(seqs[0])
    expect(seqs[2]).toBeGreaterThan(seqs[1])
    const back = await db.selectFrom('event').select('payload').orderBy('seq').execute()
    expect(back.map((r) => Array.from(r.payload))).toEqual([[0], [1], [2]])
    await db.destroy()
  })
})
