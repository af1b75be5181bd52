#!/usr/bin/env node
// Operator CLI (`npx pds <command>` or `node dist/cli.js <command>`). It reads the same
// environment as the server and works on the store directly, so it needs no admin password and
// works whether or not the server is running (SQLite in WAL mode, or PostgreSQL).
import { randomBytes } from 'node:crypto'
import { parseArgs } from 'node:util'
import { Secp256k1Keypair } from '@atproto/crypto'
import { XRPCError } from '@atproto/xrpc-server'
import { ConfigError, loadConfig, migrateEnv } from './config.js'
import { MigrateError, runMigration } from './migration/command.js'
import { ask } from './prompt.js'
import { openDb, type Db } from './db/index.js'
import { tokenKeys } from './auth/session-tokens.js'
import { createFreshAccount } from './account/create.js'
import { findAccount } from './account/store.js'
import { restore, takedown } from './account/lifecycle.js'
import { issueEmailToken } from './account/email-tokens.js'
import { createInviteCodes } from './account/invites.js'

const USAGE = `usage: pds <command> [options]

commands:
  create-account --handle <handle> --email <email> [--password <pw>] [--invite-code <code>]
                 creates an active account; prints its DID, handle and (if generated) password
  takedown <did|handle|email> [--ref <text>]
                 takes the account down (status takendown, #account event)
  restore <did|handle|email>
                 lifts a takedown (status active, #account event)
  reset-password <did|handle|email>
                 issues a password-reset token (1 hour) and prints it instead of mailing it
  create-invite [--uses <n>] [--count <n>] [--for <did>]
                 creates invite codes (default: one code, one use) and prints one per line
  migrate --from <url> --to <url> --handle <handle> [--new-handle <h>] [--email <e>]
          [--invite-code <code>] [--plc-token <token>] [--flow spec|standard]
                 moves an account between two servers (needs no server environment); the
                 password comes from PDS_MIGRATE_PASSWORD or a prompt, never an argument;
                 PDS_DID_PLC_URL (default https://plc.directory) is read for the final check;
                 run it again after an interruption to continue

The environment is the server's (PDS_DATA_DIRECTORY, PDS_DB_POSTGRES_URL, ...).`

class UsageError extends Error {}

async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv
  if (!command || command === 'help' || command === '--help' || command === '-h') {
    process.stdout.write(USAGE + '\n')
    return command ? 0 : 2
  }
  if (command === 'migrate') return migrate(rest)
  const { values, positionals } = parseArgs({
    args: rest,
    allowPositionals: true,
    options: {
      handle: { type: 'string' },
      email: { type: 'string' },
      password: { type: 'string' },
      'invite-code': { type: 'string' },
      ref: { type: 'string' },
      uses: { type: 'string' },
      count: { type: 'string' },
      for: { type: 'string' },
    },
  })
  const config = loadConfig()
  const db = await openDb(config.db)
  try {
    const account = async () => {
      const id = positionals[0]
      if (!id) throw new UsageError(`${command} needs a DID, handle or email`)
      const found = await findAccount(db, id)
      if (!found) throw new UsageError(`no account ${id}`)
      return found
    }
    switch (command) {
      case 'create-account': {
        if (!values.handle || !values.email) throw new UsageError('create-account needs --handle and --email')
        const password = values.password ?? randomBytes(12).toString('base64url')
        const created = await createFreshAccount(
          {
            // the operator needs no invite code (one given is still checked and spent)
            config: { ...config, inviteRequired: false },
            db,
            tokenKeys: tokenKeys(config.secrets.jwtSecret, config.serviceDid),
            rotationKey: await Secp256k1Keypair.import(config.secrets.plcRotationKey),
          },
          { handle: values.handle, email: values.email, password, inviteCode: values['invite-code'] },
        )
        print({ did: created.did, handle: created.handle, ...(values.password ? {} : { password }) })
        return 0
      }
      case 'takedown': {
        const a = await account()
        const changed = await takedown(db, a.did, values.ref ?? null)
        if (!changed && a.status !== 'takendown') throw new UsageError(`account ${a.did} is ${a.status}`)
        print({ did: a.did, status: 'takendown' })
        return 0
      }
      case 'restore': {
        const a = await account()
        const changed = await restore(db, a.did)
        if (!changed && a.status !== 'active') throw new UsageError(`account ${a.did} is ${a.status}, not takendown`)
        print({ did: a.did, status: 'active' })
        return 0
      }
      case 'reset-password': {
        const a = await account()
        if (a.status === 'deleted') throw new UsageError(`account ${a.did} is deleted`)
        process.stdout.write((await issueEmailToken(db, a.did, 'reset-password')) + '\n')
        return 0
      }
      case 'create-invite': {
        const codes = await createInviteCodes(db, {
          hostname: config.hostname,
          useCount: count(values.uses, 'uses'),
          count: count(values.count, 'count'),
          forAccount: values.for,
        })
        process.stdout.write(codes.join('\n') + '\n')
        return 0
      }
      default:
        throw new UsageError(`unknown command ${command}\n\n${USAGE}`)
    }
  } finally {
    await (db as Db).destroy()
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
    },
  })
  if (!values.from || !values.to || !values.handle) throw new UsageError('migrate needs --from, --to and --handle')
  if (values.flow !== undefined && values.flow !== 'spec' && values.flow !== 'standard') throw new UsageError('--flow is spec or standard')
  const env = migrateEnv()
  const password = env.password ?? (await ask(`password for ${values.handle}: `, true))
  if (!password) throw new UsageError('no password: set PDS_MIGRATE_PASSWORD or run in a terminal')
  try {
    await runMigration(
      {
        from: values.from,
        to: values.to,
        handle: values.handle,
        password,
        newHandle: values['new-handle'],
        email: values.email,
        inviteCode: values['invite-code'],
        plcToken: values['plc-token'],
        plcUrl: env.plcUrl,
        flow: values.flow as 'spec' | 'standard' | undefined,
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
  }
}

function count(v: string | undefined, name: string): number {
  if (v === undefined) return 1
  const n = Number(v)
  if (!Number.isInteger(n) || n < 1) throw new UsageError(`--${name} must be a positive integer`)
  return n
}

function print(obj: Record<string, string>) {
  for (const [k, v] of Object.entries(obj)) process.stdout.write(`${k}: ${v}\n`)
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
