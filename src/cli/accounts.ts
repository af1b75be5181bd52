// `pds account ...` and `pds invite ...`: the store directly (through the account/ modules), so they
// need no admin password and work whether or not the server runs.
import { randomBytes } from 'node:crypto'
import { Secp256k1Keypair } from '@atproto/crypto'
import type { Config } from '../config.js'
import type { Db } from '../db/index.js'
import { XRPCError } from '@atproto/xrpc-server'
import { access, constants, mkdir, readdir } from 'node:fs/promises'
import { resolve } from 'node:path'
import { tokenKeys } from '../account/session-tokens.js'
import { createFreshAccount } from '../account/create.js'
import { findAccount, type AccountRow } from '../account/store.js'
import { markDeleted, restore, takedown } from '../account/lifecycle.js'
import { issueEmailToken } from '../account/email-tokens.js'
import { createInviteCodes, inviteCodeViews, invitedBy } from '../account/invites.js'
import { checkEmail, checkHandleFree, validateHandle } from '../account/handles.js'
import { changePassword, MAX_PASSWORD_LENGTH } from '../account/password.js'
import { setEmail } from '../account/email.js'
import { setHandle } from '../identity/amend.js'
import { createMailer } from '../mail/index.js'
import { resetPasswordMail } from '../mail/templates.js'
import { createLogger } from '../logger.js'
import { openBlobStore } from '../blob/blobstore-open.js'
import { beginExport, directorySink, type ExportManifest } from '../account/export.js'
import { output, positiveInt, str, UsageError, type Options, type Parsed } from './args.js'

export type Ctx = { config: Config; db: Db }
/** noDb: runs without opening the store (it may not exist yet); ctx.db is then absent */
/** `noDb`: runs without opening the store (and gets none) */
export type Command = { usage: string; options?: Options } & (
  { noDb?: false; run(ctx: Ctx, p: Parsed): Promise<number> } | { noDb: true; run(ctx: Pick<Ctx, 'config'>, p: Parsed): Promise<number> }
)

async function target(ctx: Ctx, p: Parsed, what: string): Promise<AccountRow> {
  const id = p.positionals[0]
  if (!id) throw new UsageError(`${what} needs a DID, handle or email`)
  const found = await findAccount(ctx.db, id)
  if (!found) throw new UsageError(`no account ${id}`)
  return found
}

const summary = (a: AccountRow) => ({ did: a.did, handle: a.handle, email: a.email, status: a.status, createdAt: a.created_at })

export const accountCommands: Record<string, Command> = {
  list: {
    usage: 'account list [--status <status>] [--limit <n>]   accounts, oldest first',
    options: { status: { type: 'string' }, limit: { type: 'string' } },
    async run({ db }, p) {
      let q = db
        .selectFrom('account')
        .selectAll()
        .orderBy('created_at')
        .orderBy('did')
        .limit(positiveInt(str(p, 'limit'), 'limit', 1000))
      const status = str(p, 'status')
      if (status) q = q.where('status', '=', status as AccountRow['status'])
      const rows = await q.execute()
      if (p.json) output(true, rows.map(summary))
      else for (const a of rows) process.stdout.write(`${a.did}  ${a.handle}  ${a.email ?? '-'}  ${a.status}\n`)
      return 0
    },
  },
  info: {
    usage: 'account info <did|handle|email>   the account, its repository and its invite code',
    async run(ctx, p) {
      const a = await target(ctx, p, 'account info')
      const root = await ctx.db.selectFrom('repo_root').selectAll().where('did', '=', a.did).executeTakeFirst()
      const blobs = await ctx.db
        .selectFrom('blob')
        .select((eb) => [eb.fn.countAll<number>().as('n'), eb.fn.sum<number>('size').as('bytes')])
        .where('did', '=', a.did)
        .executeTakeFirst()
      output(p.json, {
        ...summary(a),
        emailConfirmed: !!a.email_confirmed_at,
        takedownRef: a.takedown_ref ?? undefined,
        invitesDisabled: !!a.invites_disabled,
        invitedBy: (await invitedBy(ctx.db, a.did))?.code,
        repoRev: root?.rev,
        records: root ? Number(root.record_count) : 0,
        blobs: Number(blobs?.n ?? 0),
        blobBytes: Number(blobs?.bytes ?? 0),
      })
      return 0
    },
  },
  create: {
    usage:
      'account create --handle <handle> --email <email> [--password <pw>] [--invite-code <code>]\n    an active account; prints its DID, handle and (when generated) password',
    options: { handle: { type: 'string' }, email: { type: 'string' }, password: { type: 'string' }, 'invite-code': { type: 'string' } },
    async run({ config, db }, p) {
      const handle = str(p, 'handle')
      const email = str(p, 'email')
      if (!handle || !email) throw new UsageError('account create needs --handle and --email')
      const password = str(p, 'password') ?? randomBytes(12).toString('base64url')
      const created = await createFreshAccount(
        {
          // the operator is not bound by PDS_ACCOUNT_CREATION (an invite code given is still checked and spent)
          config: { ...config, accountCreation: 'open' },
          db,
          tokenKeys: tokenKeys(config.secrets.jwtSecret, config.serviceDid),
          rotationKey: await Secp256k1Keypair.import(config.secrets.plcRotationKey),
        },
        { handle, email, password, inviteCode: str(p, 'invite-code') },
      )
      output(p.json, { did: created.did, handle: created.handle, ...(str(p, 'password') ? {} : { password }) })
      return 0
    },
  },
  delete: {
    usage: 'account delete <did|handle|email>   status deleted (#account and #tombstone events), as a user deletion',
    async run(ctx, p) {
      const a = await target(ctx, p, 'account delete')
      // the command runs without the server's outbound wiring, so registered syncers are not
      // told; they find the space gone at their next credential (SpaceDeleted) or listRepos
      await ctx.db.transact((trx) => markDeleted(trx, a.did, () => {}))
      output(p.json, { did: a.did, status: 'deleted' })
      return 0
    },
  },
  takedown: {
    usage: 'account takedown <did|handle|email> [--ref <text>]   status takendown (#account event)',
    options: { ref: { type: 'string' } },
    async run(ctx, p) {
      const a = await target(ctx, p, 'account takedown')
      const changed = await takedown(ctx.db, a.did, str(p, 'ref') ?? null)
      if (!changed && a.status !== 'takendown') throw new UsageError(`account ${a.did} is ${a.status}`)
      output(p.json, { did: a.did, status: 'takendown' })
      return 0
    },
  },
  untakedown: {
    usage: 'account untakedown <did|handle|email>   lifts a takedown (status active, #account event)',
    async run(ctx, p) {
      const a = await target(ctx, p, 'account untakedown')
      const changed = await restore(ctx.db, a.did)
      if (!changed && a.status !== 'active') throw new UsageError(`account ${a.did} is ${a.status}, not takendown`)
      output(p.json, { did: a.did, status: 'active' })
      return 0
    },
  },
  'update-handle': {
    usage: 'account update-handle <did|handle|email> <new-handle>   a new PLC operation and an #identity event',
    async run(ctx, p) {
      const a = await target(ctx, p, 'account update-handle')
      const input = p.positionals[1]
      if (!input) throw new UsageError('account update-handle needs the new handle')
      const handle = await changeHandle(ctx, a.did, input)
      output(p.json, { did: a.did, handle })
      return 0
    },
  },
  'update-email': {
    usage: 'account update-email <did|handle|email> <new-email>   sets the address (unconfirmed)',
    async run(ctx, p) {
      const a = await target(ctx, p, 'account update-email')
      const input = p.positionals[1]
      if (!input) throw new UsageError('account update-email needs the new address')
      const email = checkEmail(input)
      // as the admin method: unconfirmed, pending tokens (sent to the old address) dropped, the old address told
      const mailer = createMailer(ctx.config.email, createLogger('silent'))
      try {
        await setEmail({ db: ctx.db, config: ctx.config, mailer, awaitDelivery: true }, a.did, email)
      } catch (err) {
        if (err instanceof XRPCError && err.customErrorName === 'EmailNotAvailable')
          throw new UsageError(`${email} belongs to another account`)
        throw err
      }
      output(p.json, { did: a.did, email })
      return 0
    },
  },
  'reset-password': {
    usage:
      'account reset-password <did|handle|email> [--password <pw>] [--email]\n' +
      '    sets the password (printed when generated); with --email instead mails a reset code\n' +
      '    (printed when email goes to the console)',
    options: { password: { type: 'string' }, email: { type: 'boolean' } },
    async run(ctx, p) {
      const a = await target(ctx, p, 'account reset-password')
      if (a.status === 'deleted') throw new UsageError(`account ${a.did} is deleted`)
      if (p.values.email) {
        const token = await issueEmailToken(ctx.db, a.did, 'reset-password')
        if (ctx.config.email.backend === 'console' || !a.email) {
          output(p.json, { did: a.did, token })
          return 0
        }
        await createMailer(ctx.config.email, createLogger('silent'), ctx.config.branding).send({
          to: a.email,
          ...resetPasswordMail(token, a.handle),
        })
        output(p.json, { did: a.did, sentTo: a.email })
        return 0
      }
      const given = str(p, 'password')
      const password = given ?? randomBytes(12).toString('base64url')
      if (password.length < 8 || password.length > MAX_PASSWORD_LENGTH)
        throw new UsageError(`passwords are 8 to ${MAX_PASSWORD_LENGTH} characters`)
      // as every password change: the account's sessions, grants and app passwords end, the owner is told
      const mailer = createMailer(ctx.config.email, createLogger('silent'))
      await changePassword({ db: ctx.db, config: ctx.config, mailer, awaitDelivery: true }, a.did, password, 'operator')
      output(p.json, { did: a.did, ...(given ? {} : { password }) })
      return 0
    },
  },
  export: {
    usage:
      "account export <did|handle|email> <dir>   the account's data as files: repo.car, blobs/<cid>,\n" +
      '    preferences.json, manifest.json (<dir> is created, or must be empty); `pds migrate --from-export` imports it',
    async run(ctx, p) {
      const a = await target(ctx, p, 'account export')
      const given = p.positionals[1]
      if (!given) throw new UsageError('account export needs a directory to write into')
      const dir = resolve(given)
      const blobstore = await openBlobStore(ctx.config)
      let manifest: ExportManifest
      try {
        // a taken-down or deleted account is refused before the directory is touched
        if (a.status === 'takendown' || a.status === 'deleted') throw new UsageError(`account ${a.did} is ${a.status}`)
        const exp = await beginExport({ db: ctx.db, blobstore }, a.did)
        await emptyWritableDir(dir).catch(async (err) => {
          await exp.cancel()
          throw err
        })
        manifest = await exp.writeTo(directorySink(dir))
      } finally {
        ;(blobstore as { destroy?: () => void }).destroy?.()
      }
      if (p.json) {
        output(true, { dir, ...manifest })
        return 0
      }
      const { counts, repo } = manifest
      output(false, {
        did: manifest.did,
        handle: manifest.handle,
        dir,
        repo: `repo.car (${repo.bytes} bytes, ${counts.records} records, rev ${repo.rev})`,
        blobs: `blobs/ (${counts.blobs} files, ${counts.blobBytes} bytes)`,
        preferences: `preferences.json (${counts.preferences})`,
        spaces: `spaces/ (${manifest.spaces.repos.length} permissioned repos; ${manifest.spaces.governed.length} spaces governed)`,
        manifest: 'manifest.json',
        missingBlobs: manifest.missingBlobs,
      })
      return 0
    },
  },
}

/** `dir` exists (created if not), is empty and can be written to, or a one-line refusal */
async function emptyWritableDir(dir: string): Promise<void> {
  try {
    await mkdir(dir, { recursive: true })
    if ((await readdir(dir)).length) throw new UsageError(`${dir} is not empty`)
    await access(dir, constants.W_OK)
  } catch (err) {
    if (err instanceof UsageError) throw err
    const code = (err as NodeJS.ErrnoException).code
    if (code === 'EACCES' || code === 'EPERM' || code === 'EROFS') throw new UsageError(`${dir} is not writable`)
    if (code === 'ENOTDIR' || code === 'EEXIST') throw new UsageError(`${dir} is not a directory`)
    throw new UsageError(`${dir}: ${(err as Error).message}`)
  }
}

// The same rules and change as com.atproto.admin.updateAccountHandle. Without the server's
// outbound guard a handle outside the service domains is refused (use the admin API for those).
async function changeHandle({ config, db }: Ctx, did: string, input: string): Promise<string> {
  const handle = await validateHandle({ config }, input, did)
  await checkHandleFree(db, did, handle)
  const rotationKey = await Secp256k1Keypair.import(config.secrets.plcRotationKey)
  await setHandle(db, did, handle, { rotationKey, plcUrl: config.plcUrl })
  return handle
}

export const inviteCommands: Record<string, Command> = {
  create: {
    usage: 'invite create [--uses <n>] [--count <n>] [--for <did>]   codes (default one, one use), one per line',
    options: { uses: { type: 'string' }, count: { type: 'string' }, for: { type: 'string' } },
    async run({ config, db }, p) {
      const codes = await createInviteCodes(db, {
        hostname: config.hostname,
        useCount: positiveInt(str(p, 'uses'), 'uses', 1),
        count: positiveInt(str(p, 'count'), 'count', 1),
        forAccount: str(p, 'for'),
      })
      if (p.json) process.stdout.write(JSON.stringify(codes) + '\n')
      else process.stdout.write(codes.join('\n') + '\n')
      return 0
    },
  },
  list: {
    usage: 'invite list [--for <did>]   codes with their remaining uses, newest first',
    options: { for: { type: 'string' } },
    async run({ db }, p) {
      const views = await inviteCodeViews(db, { forAccount: str(p, 'for') })
      if (p.json) output(true, views)
      else
        for (const v of views) {
          const left = v.available - v.uses.length
          process.stdout.write(`${v.code}  ${v.disabled ? 'disabled' : `${left}/${v.available} left`}  for ${v.forAccount}\n`)
        }
      return 0
    },
  },
  disable: {
    usage: 'invite disable <code>... | --account <did>   codes no sign-up accepts any more',
    options: { account: { type: 'string' } },
    async run({ db }, p) {
      const account = str(p, 'account')
      if (!p.positionals.length && !account) throw new UsageError('invite disable needs codes or --account')
      let q = db.updateTable('invite_code').set({ disabled: 1 })
      q = account ? q.where('for_account', '=', account) : q.where('code', 'in', p.positionals)
      const res = await q.executeTakeFirst()
      output(p.json, { disabled: Number(res.numUpdatedRows) })
      return 0
    },
  },
}
