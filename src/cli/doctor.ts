// `pds doctor`: what operators most often get wrong, one line per check (ok, warn or fail; a
// failure says what to do), exit 1 when any check fails. It asks the server the way the network
// does, through its public URL, and checks what it stands on by a round trip each (doctor-infra.ts).
// The quick start's defaults (development mode, the local PLC log, no relays) pass.
import { isIP } from 'node:net'
import { request } from '../outbound.js'
import { createMailer } from '../mail/index.js'
import { createLogger } from '../logger.js'
import { output } from './args.js'
import type { Command, Ctx } from './accounts.js'
import { freeBytes } from './status.js'
import { accountsOutOfControl } from '../identity/control.js'
import { checkBuckets, checkDatabase, checkDns, checkRedis, checkTls, type Level } from './doctor-infra.js'

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

  await checkDatabase(config, db, add)
  await checkRedis(config, add)
  await checkBuckets(config, add)
  await checkDns(config, add)

  try {
    const r = await get(`${config.publicUrl}/xrpc/_health`)
    if (r.status === 200) add('public-url', 'ok', `${config.publicUrl} answers (${r.text.trim()})`)
    else
      add(
        'public-url',
        'fail',
        `${config.publicUrl}/xrpc/_health answered ${r.status}: is the server running, and the reverse proxy forwarding to it?`,
      )
  } catch (err) {
    add(
      'public-url',
      'fail',
      `${config.publicUrl} unreachable: ${why(err)}: start the server (systemctl start pds), check PDS_PUBLIC_URL, DNS and the reverse proxy`,
    )
  }
  await checkTls(config, add)

  try {
    const r = await get(`${config.publicUrl}/.well-known/did.json`)
    const id = r.status === 200 ? (JSON.parse(r.text) as { id?: string }).id : undefined
    if (id === config.serviceDid) add('did-document', 'ok', `/.well-known/did.json is ${id}`)
    else
      add(
        'did-document',
        'fail',
        `/.well-known/did.json answered ${r.status}${id ? ` for ${id}, expected ${config.serviceDid}` : ''}: PDS_HOSTNAME and PDS_PUBLIC_URL must name this server`,
      )
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
      else
        add(
          'handle',
          'fail',
          `${url} answered ${r.status} ${r.text.trim().slice(0, 80)}, expected ${account.did}: the handle's name must reach this server (wildcard DNS, reverse proxy)`,
        )
    } catch (err) {
      add('handle', 'fail', `${url}: ${why(err)}: the handle's name must reach this server (wildcard DNS, reverse proxy)`)
    }
  }

  const plc = config.plcUrl
  if (!plc) {
    // the server keeps DIDs in its own log: nothing to reach, and in development that is the point
    if (config.devMode) add('plc-directory', 'ok', "development mode: DIDs live in this server's own log")
    else
      add(
        'plc-directory',
        'warn',
        "DIDs live in this server's own log, which nobody else can resolve: set PDS_DID_PLC_URL=https://plc.directory",
      )
  } else {
    try {
      const r = await get(`${plc}/_health`)
      if (r.date) dates.push({ from: plc, date: r.date, at: Date.now() })
      add('plc-directory', r.status < 500 ? 'ok' : 'fail', `${plc} answered ${r.status}`)
    } catch (err) {
      add('plc-directory', 'fail', `${plc} unreachable: ${why(err)}: check PDS_DID_PLC_URL and the outgoing network`)
    }
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

  if (!config.crawlers.length) {
    if (config.devMode) add('relays', 'ok', 'development mode: no relay is asked to crawl')
    else add('relays', 'warn', 'PDS_CRAWLERS is empty: no relay learns about this server; set PDS_CRAWLERS=https://bsky.network')
  }
  for (const relay of config.crawlers) {
    try {
      const r = await get(`${relay.replace(/\/+$/, '')}/xrpc/_health`)
      if (r.date) dates.push({ from: relay, date: r.date, at: Date.now() })
      add('relay', r.status < 500 ? 'ok' : 'fail', `${relay} answered ${r.status}`)
    } catch (err) {
      add('relay', 'fail', `${relay} unreachable: ${why(err)}: check PDS_CRAWLERS and the outgoing network`)
      continue
    }
    await relayView(relay, config.hostname, db, add)
  }

  if (config.email.backend === 'console') {
    add('email', 'warn', 'PDS_EMAIL_BACKEND is console: no email leaves this server; set PDS_EMAIL_BACKEND=http-json with a provider')
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
      add('email', 'fail', `${why(err)}: check PDS_EMAIL_HTTP_URL, PDS_EMAIL_HTTP_TOKEN and PDS_EMAIL_FROM`)
    }
  }

  const free = freeBytes(config.dataDir)
  if (free === undefined) add('disk', 'warn', `free space of ${config.dataDir} unknown`)
  else {
    const level: Level = free < 0.5 * GiB ? 'fail' : free < 5 * GiB ? 'warn' : 'ok'
    add(
      'disk',
      level,
      `${(free / GiB).toFixed(1)} GiB free under ${config.dataDir}${level === 'ok' ? '' : ': free some space or grow the disk'}`,
    )
  }

  const ref = dates[0]
  if (!ref) add('clock', config.devMode ? 'ok' : 'warn', 'no PLC directory or relay answered with a date to compare the clock with')
  else {
    // a Date header has whole seconds: up to a second of difference is rounding
    const skew = Math.round((ref.at - Date.parse(ref.date)) / 1000)
    const level: Level = Math.abs(skew) > 60 ? 'fail' : Math.abs(skew) > 5 ? 'warn' : 'ok'
    add(
      'clock',
      level,
      `${Math.abs(skew)} s ${skew >= 0 ? 'ahead of' : 'behind'} ${ref.from}${level === 'ok' ? '' : ': run NTP (timedatectl set-ntp true)'}`,
    )
  }
  return out
}

export const doctorCommand: Command = {
  usage:
    'doctor [--handle <handle>] [--send-test-email <address>]\n' +
    '    checks the database, Redis, S3 buckets, DNS, the public URL and its TLS certificate, the DID\n' +
    '    document, a handle, the PLC directory, relays (and their view of this host), email, disk and clock;\n' +
    '    exit 1 when one fails',
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
