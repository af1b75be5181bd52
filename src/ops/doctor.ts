// `pds doctor`: what operators most often get wrong, one line per check (ok, warn or fail), exit 1
// when any check fails. It asks the server the way the network does: through its public URL.
import { isIP } from 'node:net'
import { request } from '../outbound.js'
import { createMailer } from '../mail/index.js'
import { createLogger } from '../logger.js'
import { output } from './args.js'
import type { Command, Ctx } from './accounts.js'
import { freeBytes } from './status.js'
import { accountsOutOfControl } from '../identity/control.js'

type Level = 'ok' | 'warn' | 'fail'
type Check = { check: string; level: Level; detail: string }

const GiB = 1024 ** 3
const TIMEOUT_MS = 10_000

async function get(url: string, headers: Record<string, string> = {}) {
  const res = await request(url, { method: 'GET', headers, signal: AbortSignal.timeout(TIMEOUT_MS) })
  const text = await res.body.text()
  const date = res.headers.date
  return { status: res.statusCode, text, date: typeof date === 'string' ? date : undefined }
}

const why = (err: unknown) =>
  (err as Error)?.name === 'TimeoutError' ? `no answer within ${TIMEOUT_MS} ms` : String((err as Error)?.message ?? err)

const loopbackHost = (host: string) => host === 'localhost' || isIP(host.replace(/^\[|\]$/g, '')) !== 0

/** what the relay says of this host (com.atproto.sync.getHostStatus), and what to do about it */
async function relayView(relay: string, hostname: string, db: Ctx['db'], add: (check: string, level: Level, detail: string) => void) {
  let r: Awaited<ReturnType<typeof get>>
  try {
    r = await get(`${relay.replace(/\/+$/, '')}/xrpc/com.atproto.sync.getHostStatus?hostname=${encodeURIComponent(hostname)}`)
  } catch (err) {
    return add('relay-view', 'warn', `${relay} getHostStatus: ${why(err)}`)
  }
  let body: { seq?: unknown; status?: unknown; error?: unknown } = {}
  try {
    body = JSON.parse(r.text)
  } catch {}
  if (r.status === 404 || body.error === 'HostNotFound') {
    return add(
      'relay-view',
      'warn',
      `${relay} does not know ${hostname}: restart the server (it asks relays to crawl at start) or POST {"hostname":"${hostname}"} to ${relay}/xrpc/com.atproto.sync.requestCrawl`,
    )
  }
  if (r.status !== 200)
    return add('relay-view', 'warn', `${relay} answered getHostStatus with ${r.status}: its view of ${hostname} is unknown`)
  const row = await db
    .selectFrom('event')
    .select((eb) => eb.fn.max('seq').as('seq'))
    .executeTakeFirst()
  const ours = Number(row?.seq ?? 0)
  const theirs = typeof body.seq === 'number' ? body.seq : undefined
  if (theirs !== undefined && theirs > ours) {
    return add(
      'relay-view',
      'warn',
      `${relay} has read up to seq ${theirs} from ${hostname}, ahead of this server's ${ours} (a reinstall or an older backup): it would skip new events up to ${theirs}. Set PDS_SEQ_FLOOR=${theirs} and restart`,
    )
  }
  const seen = theirs === undefined ? '' : `, read up to seq ${theirs} of ${ours}`
  switch (body.status) {
    case 'banned':
      return add('relay-view', 'fail', `${relay} has banned ${hostname}: only the relay's operator can lift it`)
    case 'throttled':
      return add(
        'relay-view',
        'warn',
        `${relay} throttles ${hostname}${seen}: it limits hosts with many accounts or events; ask the relay's operator`,
      )
    case 'offline':
      return add(
        'relay-view',
        'warn',
        `${relay} finds ${hostname} offline${seen}: check that the public URL passes WebSocket upgrades to /xrpc/com.atproto.sync.subscribeRepos`,
      )
    case 'idle':
      return add(
        'relay-view',
        'warn',
        `${relay} is not subscribed to ${hostname}${seen}: the next write asks it to crawl again, or restart the server`,
      )
    default:
      return add(
        'relay-view',
        'ok',
        `${relay} follows ${hostname} (${typeof body.status === 'string' ? body.status : 'status not given'}${seen})`,
      )
  }
}

export async function runChecks({ config, db }: Ctx, opts: { handle?: string; testEmail?: string }): Promise<Check[]> {
  const out: Check[] = []
  const add = (check: string, level: Level, detail: string) => out.push({ check, level, detail })
  const dates: { from: string; date: string; at: number }[] = []

  try {
    const r = await get(`${config.publicUrl}/xrpc/_health`)
    if (r.status === 200) add('public-url', 'ok', `${config.publicUrl} answers (${r.text.trim()})`)
    else add('public-url', 'fail', `${config.publicUrl}/xrpc/_health answered ${r.status}`)
  } catch (err) {
    add('public-url', 'fail', `${config.publicUrl} unreachable: ${why(err)}`)
  }

  try {
    const r = await get(`${config.publicUrl}/.well-known/did.json`)
    const id = r.status === 200 ? (JSON.parse(r.text) as { id?: string }).id : undefined
    if (id === config.serviceDid) add('did-document', 'ok', `/.well-known/did.json is ${id}`)
    else add('did-document', 'fail', `/.well-known/did.json answered ${r.status}${id ? ` for ${id}, expected ${config.serviceDid}` : ''}`)
  } catch (err) {
    add('did-document', 'fail', `/.well-known/did.json: ${why(err)}`)
  }

  const account =
    opts.handle !== undefined
      ? await db.selectFrom('account').select(['did', 'handle']).where('handle', '=', opts.handle.toLowerCase()).executeTakeFirst()
      : await db
          .selectFrom('account')
          .select(['did', 'handle'])
          .where('status', '=', 'active')
          .orderBy('created_at')
          .limit(1)
          .executeTakeFirst()
  if (!account) {
    add('handle', opts.handle ? 'fail' : 'warn', opts.handle ? `no account ${opts.handle}` : 'no active account to check a handle with')
  } else {
    // a loopback public URL (a test or a server behind nothing yet): ask it with the handle as Host
    const base = new URL(config.publicUrl)
    const direct = !loopbackHost(base.hostname)
    const url = direct ? `${base.protocol}//${account.handle}/.well-known/atproto-did` : `${config.publicUrl}/.well-known/atproto-did`
    try {
      const r = await get(url, direct ? {} : { host: account.handle })
      if (r.status === 200 && r.text.trim() === account.did) add('handle', 'ok', `${account.handle} answers ${account.did}`)
      else add('handle', 'fail', `${url} answered ${r.status} ${r.text.trim().slice(0, 80)}, expected ${account.did}`)
    } catch (err) {
      add('handle', 'fail', `${url}: ${why(err)}`)
    }
  }

  const plc = config.plcUrl ?? 'https://plc.directory'
  try {
    const r = await get(`${plc}/_health`)
    if (r.date) dates.push({ from: plc, date: r.date, at: Date.now() })
    add('plc-directory', r.status < 500 ? 'ok' : 'fail', `${plc} answered ${r.status}`)
  } catch (err) {
    add('plc-directory', 'fail', `${plc} unreachable: ${why(err)}`)
  }

  // people may take their DID over with their own rotation key: say whose this server can no longer change
  try {
    const { checked, more, lost } = await accountsOutOfControl(db, config, 1000)
    const scope = `${checked} did:plc account(s)${more ? ' (the oldest 1000)' : ''}`
    if (!lost.length) add('plc-control', 'ok', `this server's rotation key signs for all ${scope}`)
    else {
      const names = lost.slice(0, 10).map((a) => a.handle ?? a.did)
      add(
        'plc-control',
        'warn',
        `this server no longer holds a rotation key of ${lost.length} of ${scope}: ${names.join(', ')}${lost.length > 10 ? ', ...' : ''}; their owners sign PLC operations (handle changes too) with their own keys`,
      )
    }
  } catch (err) {
    add('plc-control', 'warn', `who controls the accounts' DIDs could not be checked: ${why(err)}`)
  }

  if (!config.crawlers.length) add('relays', 'warn', 'PDS_CRAWLERS is empty: no relay learns about this server')
  for (const relay of config.crawlers) {
    try {
      const r = await get(`${relay.replace(/\/+$/, '')}/xrpc/_health`)
      if (r.date) dates.push({ from: relay, date: r.date, at: Date.now() })
      add('relay', r.status < 500 ? 'ok' : 'fail', `${relay} answered ${r.status}`)
    } catch (err) {
      add('relay', 'fail', `${relay} unreachable: ${why(err)}`)
      continue
    }
    await relayView(relay, config.hostname, db, add)
  }

  if (config.email.backend === 'console') {
    add('email', 'warn', 'PDS_EMAIL_BACKEND is console: no email leaves this server')
  } else if (!opts.testEmail) {
    add('email', 'ok', `${config.email.flavor} via ${new URL(config.email.url).host} (not tried; --send-test-email <address> sends one)`)
  } else {
    try {
      await createMailer(config.email, createLogger('silent'), config.branding).send({
        to: opts.testEmail,
        subject: 'Test message from your PDS',
        text: `This message was sent by \`pds doctor\` on ${config.hostname} to check outgoing email.\n`,
      })
      add('email', 'ok', `the provider accepted a test message to ${opts.testEmail}`)
    } catch (err) {
      add('email', 'fail', why(err))
    }
  }

  const free = freeBytes(config.dataDir)
  if (free === undefined) add('disk', 'warn', `free space of ${config.dataDir} unknown`)
  else {
    const level: Level = free < 0.5 * GiB ? 'fail' : free < 5 * GiB ? 'warn' : 'ok'
    add('disk', level, `${(free / GiB).toFixed(1)} GiB free under ${config.dataDir}`)
  }

  const ref = dates[0]
  if (!ref) add('clock', 'warn', 'no Date header to compare the clock with')
  else {
    // a Date header has whole seconds: up to a second of difference is rounding
    const skew = Math.round((ref.at - Date.parse(ref.date)) / 1000)
    const level: Level = Math.abs(skew) > 60 ? 'fail' : Math.abs(skew) > 5 ? 'warn' : 'ok'
    add('clock', level, `${Math.abs(skew)} s ${skew >= 0 ? 'ahead of' : 'behind'} ${ref.from}`)
  }
  return out
}

export const doctorCommand: Command = {
  usage:
    'doctor [--handle <handle>] [--send-test-email <address>]\n' +
    '    checks public URL, DID document, a handle, PLC directory, relays (and their view of this host), email, disk and clock',
  options: { handle: { type: 'string' }, 'send-test-email': { type: 'string' } },
  async run(ctx, p) {
    const handle = p.values.handle
    const testEmail = p.values['send-test-email']
    const checks = await runChecks(ctx, {
      handle: typeof handle === 'string' ? handle : undefined,
      testEmail: typeof testEmail === 'string' ? testEmail : undefined,
    })
    if (p.json) output(true, checks)
    else for (const c of checks) process.stdout.write(`${c.level.padEnd(4)}  ${c.check.padEnd(13)}  ${c.detail}\n`)
    return checks.some((c) => c.level === 'fail') ? 1 : 0
  },
}
