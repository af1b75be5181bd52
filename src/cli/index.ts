#!/usr/bin/env node
// Operator CLI (`npx pds <command>` or `node dist/cli/index.js <command>`). It reads the same
// environment as the server and works on the store directly, so it needs no admin password and
// works whether or not the server is running (SQLite in WAL mode, or PostgreSQL).
import { parseArgs } from 'node:util'
import { XRPCError } from '@atproto/xrpc-server'
import { cliEnv, ConfigError, DEFAULT_ENV_FILE, loadConfig, migrateEnv } from '../config.js'
import { useNameserversForHttp } from '../net/dns.js'
import { MigrateError, openExport, runMigration, type ExportSource } from './migrate.js'
import { ask } from './prompt.js'
import { openDb } from '../db/index.js'
import { parse, UsageError } from './args.js'
import { accountCommands, inviteCommands, type Command } from './accounts.js'
import { requestCrawlCommand, statusCommand } from './status.js'
import { backupWithS3, restoreWithS3 } from './backup-s3.js'
import { doctorCommand } from './doctor.js'
import { blobsCommands } from './blobs.js'
import { describeStore, requireStore } from './store.js'

const groups: Record<string, Record<string, Command>> = { account: accountCommands, invite: inviteCommands, blobs: blobsCommands }
const single: Record<string, Command> = {
  status: statusCommand,
  'request-crawl': requestCrawlCommand,
  backup: backupWithS3,
  restore: restoreWithS3,
  doctor: doctorCommand,
}

const MIGRATE_USAGE = `migrate --from <url> --to <url> --handle <handle> [--new-handle <h>] [--email <e>]
        [--invite-code <code>] [--plc-token <token>] [--flow spec|standard] [--from-export <dir|tar>]
        [--spaces-dir <dir>]
    moves an account between two servers (needs no server environment); the password comes
    from PDS_MIGRATE_PASSWORD or a prompt, never an argument; PDS_DID_PLC_URL (default
    https://plc.directory) is read for the final check; run it again after an interruption.
    Permissioned repos (Spaces) cannot be imported anywhere yet: they are saved to --spaces-dir
    (default ./spaces-<did>) and stay on the origin; spaces the account governs are created
    again on the destination with their members
  migrate --from-export <dir|tar> --to <url>
    imports an export (pds account export, or the account page's download) into the account
    with its DID on <url>, created there beforehand; with --from the repository, blobs and
    preferences of a whole move come from the export`

const indent = (s: string) =>
  s
    .split('\n')
    .map((l) => '  ' + l)
    .join('\n')
const USAGE = [
  'usage: pds [--env-file <file>] <command> [options]   (every command takes --help and --json)',
  '',
  ...Object.values(groups).flatMap((g) => Object.values(g).map((c) => indent(c.usage))),
  ...Object.values(single).map((c) => indent(c.usage)),
  indent(MIGRATE_USAGE),
  '',
  "The settings are the server's: its environment file (--env-file <file>, else PDS_ENV_FILE, else",
  `${DEFAULT_ENV_FILE} when it exists), with variables set in the environment over it. account, invite`,
  'and status work on the store directly, whether or not the server runs; a command never creates',
  'a store (the server does on its first start).',
].join('\n')

/** `--env-file <file>` / `--env-file=<file>` anywhere before the command's own `--` */
function takeEnvFile(argv: string[]): { envFile?: string; rest: string[] } {
  const rest: string[] = []
  let envFile: string | undefined
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]
    if (a === '--env-file') {
      envFile = argv[++i]
      if (!envFile) throw new UsageError('--env-file needs a file')
    } else if (a.startsWith('--env-file=')) envFile = a.slice('--env-file='.length)
    else rest.push(a)
  }
  return { envFile, rest }
}

async function main(all: string[]): Promise<number> {
  const { envFile, rest: argv } = takeEnvFile(all)
  const [command, ...rest] = argv
  if (!command || command === 'help' || command === '--help' || command === '-h') {
    process.stdout.write(USAGE + '\n')
    return command ? 0 : 2
  }
  if (command === 'migrate') return migrate(rest)
  let cmd: Command | undefined = single[command]
  let args = rest
  const group = groups[command]
  if (group) {
    const [sub, ...more] = rest
    if (!sub || sub === '--help' || sub === '-h') {
      process.stdout.write(
        Object.values(group)
          .map((c) => 'usage: pds ' + c.usage)
          .join('\n') + '\n',
      )
      return sub ? 0 : 2
    }
    cmd = group[sub]
    if (!cmd) throw new UsageError(`unknown command ${command} ${sub}\n\n${USAGE}`)
    args = more
  }
  if (!cmd) throw new UsageError(`unknown command ${command}\n\n${USAGE}`)
  const parsed = parse(args, cmd.options ?? {})
  if (parsed === 'help') {
    process.stdout.write('usage: pds ' + cmd.usage + '\n')
    return 0
  }
  const { env, file } = cliEnv(envFile)
  const first = loadConfig(withoutSecretFile(env))
  // the doctor's relay and PLC checks, S3 restores: resolved where the server resolves them
  if (first.dnsNameservers.length) await useNameserversForHttp(first.dnsNameservers)
  if (cmd.noDb) return cmd.run({ config: first }, parsed)
  // before anything is written (loading the configuration may generate secrets): is there a store?
  await requireStore(first.db, first.dataDir, file)
  // an operator at a terminal sees which store a command works on (output stays clean for scripts;
  // `pds status` names it too)
  if (process.stderr.isTTY) {
    process.stderr.write(`pds: store: ${describeStore(first.db, first.dataDir)}${file ? ` (settings from ${file})` : ''}\n`)
  }
  const config = loadConfig(env)
  const db = await openDb(config.db)
  try {
    return await cmd.run({ config, db }, parsed)
  } finally {
    await db.destroy()
  }
}

// loading the configuration writes generated secrets into the data directory; a command that
// needs no secrets (restore, which wants that directory empty) must not
function withoutSecretFile(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  const filler = '0'.repeat(63) + '1'
  return {
    ...env,
    PDS_JWT_SECRET: env.PDS_JWT_SECRET || filler,
    PDS_OAUTH_SIGNING_KEY: env.PDS_OAUTH_SIGNING_KEY || filler,
    PDS_PLC_ROTATION_KEY_K256_PRIVATE_KEY_HEX: env.PDS_PLC_ROTATION_KEY_K256_PRIVATE_KEY_HEX || filler,
  }
}

async function migrate(args: string[]): Promise<number> {
  const { values } = parseArgs({
    args,
    options: {
      from: { type: 'string' },
      to: { type: 'string' },
      handle: { type: 'string' },
      'new-handle': { type: 'string' },
      email: { type: 'string' },
      'invite-code': { type: 'string' },
      'plc-token': { type: 'string' },
      flow: { type: 'string' },
      'from-export': { type: 'string' },
      'spaces-dir': { type: 'string' },
    },
  })
  const fromExport = values['from-export']
  if (fromExport !== undefined && !values.from) {
    if (!values.to) throw new UsageError('migrate --from-export needs --to')
  } else if (!values.from || !values.to || !values.handle) throw new UsageError('migrate needs --from, --to and --handle')
  if (values.flow !== undefined && values.flow !== 'spec' && values.flow !== 'standard') throw new UsageError('--flow is spec or standard')
  const env = migrateEnv()
  let source: ExportSource | undefined
  try {
    source = fromExport !== undefined ? await openExport(fromExport) : undefined
    const handle = values.handle ?? source!.manifest.handle
    const password = env.password ?? (await ask(`password for ${handle}: `, true))
    if (!password) throw new UsageError('no password: set PDS_MIGRATE_PASSWORD or run in a terminal')
    await runMigration(
      {
        from: values.from,
        to: values.to,
        handle,
        fromExport: source,
        password,
        newHandle: values['new-handle'],
        email: values.email,
        inviteCode: values['invite-code'],
        plcToken: values['plc-token'],
        plcUrl: env.plcUrl,
        flow: values.flow,
        spacesDir: values['spaces-dir'],
      },
      { log: (line) => process.stdout.write(line + '\n'), askToken: (q) => ask(q, false) },
    )
    return 0
  } catch (err) {
    if (err instanceof MigrateError) {
      process.stderr.write(`pds migrate: ${err.message}\n`)
      return 1
    }
    throw err
  } finally {
    await source?.close()
  }
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (err: unknown) => {
    if (err instanceof ConfigError) process.stderr.write(`config error: ${err.message}\n`)
    else if (err instanceof UsageError) process.stderr.write(`pds: ${err.message}\n`)
    else if (err instanceof XRPCError) process.stderr.write(`pds: ${err.payload.error}: ${err.payload.message}\n`)
    else if (err instanceof Error && err.name === 'TypeError' && 'code' in err) process.stderr.write(`pds: ${err.message}\n`)
    else process.stderr.write(`pds: ${err instanceof Error ? err.stack : String(err)}\n`)
    process.exit(1)
  },
)
