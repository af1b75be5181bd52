// The operator CLI finds the installed server's store the way the service does, through its
// environment file, from whatever directory it runs in (`bin/pds`, as installed on the PATH); and
// it never makes a store of its own: pointed where none exists it says so and creates nothing.
import { existsSync, readdirSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import pg from 'pg'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { runProcess } from './cli-run.js'
import { describe, dialect, newAccount, postgresUrl, startTestPds, tempDir, type TestPds } from './harness.js'

const PDS = new URL('../bin/pds', import.meta.url).pathname

function pds(
  args: string[],
  opts: { env?: Record<string, string>; cwd: string },
): Promise<{ code: number | null; out: string; err: string }> {
  return runProcess(PDS, args, opts)
}

const envFile = (env: Record<string, string>) => {
  const file = join(tempDir('pds-etc-'), 'pds.env')
  writeFileSync(
    file,
    '# the service environment\n' +
      Object.entries(env)
        .map(([k, v]) => `${k}=${v}\n`)
        .join(''),
    { mode: 0o600 },
  )
  return file
}

async function schemaExists(schema: string) {
  const client = new pg.Client({ connectionString: postgresUrl })
  await client.connect()
  try {
    return (await client.query('select 1 from information_schema.schemata where schema_name = $1', [schema])).rowCount === 1
  } finally {
    await client.end()
  }
}

describe('the CLI and the service environment file', { timeout: 180_000 }, () => {
  let server: TestPds
  let handle: string
  let file: string
  const elsewhere = tempDir('pds-cwd-')
  beforeAll(async () => {
    server = await startTestPds()
    handle = (await newAccount(server.url, 'envfile')).handle
    file = envFile(server.env)
  })
  afterAll(() => server?.stop())

  it('finds the store from another directory with --env-file, PDS_ENV_FILE, and says which it used', async () => {
    const listed = await pds(['--env-file', file, 'account', 'list', '--json'], { cwd: elsewhere })
    expect(listed.code, listed.err).toBe(0)
    expect((JSON.parse(listed.out) as { handle: string }[]).map((a) => a.handle)).toContain(handle)

    const viaEnv = await pds(['account', 'info', handle, '--json'], { cwd: elsewhere, env: { PDS_ENV_FILE: file } })
    expect(viaEnv.code, viaEnv.err).toBe(0)
    expect(JSON.parse(viaEnv.out).handle).toBe(handle)

    const status = await pds(['status', '--env-file', file, '--json'], { cwd: elsewhere })
    expect(status.code, status.err).toBe(0)
    const s = JSON.parse(status.out)
    expect(s.dataDirectory).toBe(server.dataDir)
    expect(s.store).toContain(dialect === 'sqlite' ? join(server.dataDir, 'pds.sqlite') : server.env.PDS_DB_POSTGRES_SCHEMA)
    // nothing was made in the directory the CLI ran in
    expect(readdirSync(elsewhere)).toEqual([])
  })

  it('refuses, in one line, where there is no store, and creates nothing', async () => {
    const empty = join(tempDir('pds-nostore-'), 'data')
    const env: Record<string, string> = { ...server.env, PDS_DATA_DIRECTORY: empty }
    if (dialect === 'postgres') env.PDS_DB_POSTGRES_SCHEMA = `nostore_${Date.now().toString(36)}`
    const wrong = envFile(env)
    for (const args of [
      ['account', 'list'],
      ['account', 'create', '--handle', 'fresh.test', '--email', 'fresh@example.com'],
      ['backup', join(elsewhere, 'b')],
    ]) {
      const r = await pds(['--env-file', wrong, ...args], { cwd: elsewhere })
      expect(r.code, args.join(' ')).toBe(1)
      const lines = r.err.trim().split('\n')
      expect(lines).toHaveLength(1)
      expect(lines[0]).toMatch(
        /^pds: no store: .* does not exist \(settings from the environment file .*pds\.env\)\. Only the server creates a store/,
      )
      expect(r.out).toBe('')
    }
    expect(existsSync(empty)).toBe(false)
    if (dialect === 'postgres') expect(await schemaExists(env.PDS_DB_POSTGRES_SCHEMA)).toBe(false)
    expect(readdirSync(elsewhere)).toEqual([])

    // and without any settings, in a directory with no ./data, the same
    const bare = await pds(['account', 'list'], { cwd: elsewhere, env: { PDS_ENV_FILE: '' } })
    expect(bare.code).toBe(1)
    expect(bare.err).toMatch(
      /^pds: no store: SQLite at .*\/data\/pds\.sqlite does not exist \(settings from the environment \(no environment file/,
    )
    expect(readdirSync(elsewhere)).toEqual([])
  })

  it('says so when the environment file cannot be read', async () => {
    const r = await pds(['--env-file', join(elsewhere, 'missing.env'), 'account', 'list'], { cwd: elsewhere })
    expect(r.code).toBe(1)
    expect(r.err.trim()).toBe(`config error: environment file ${join(elsewhere, 'missing.env')}: no such file`)
  })
})
