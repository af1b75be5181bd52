// What the account page's rows share: its answers (values the page renders), the cookies it keeps,
// the account it acts for on this device, and the words for what went wrong.
import type { Writable } from 'node:stream'
import type { Request, Response } from 'express'
import { XRPCError } from '@atproto/xrpc-server'
import type { AccountStatus } from '../../db/schema.js'
import type { Services } from '../../context.js'
import type { SafeHtml } from '../html.js'
import { serverInfo } from '../layout.js'
import { csrfToken } from '../csrf.js'
import { readCookie, setCookie } from '../cookies.js'
import type { Device } from '../devices.js'
import { clearSealed, readSealed, setSealed } from '../sealed.js'
import * as flow from '../sign-in/flow.js'
import { REMEMBERED_MAX_S } from '../sign-in/flow.js'
import type { RateBudget, Row, RowContext, Signed } from '../rows.js'
import type { Common, Flash } from './views.js'

/** how long a confirmed password unlocks sensitive changes on this device */
export const REAUTH_S = 5 * 60
export const PATH = '/account'
/** which of the device's signed-in accounts the page shows (the device session is the authority) */
export const CURRENT = 'pds_account'
/** the account page's place for a held sign-in step on a device (an OAuth sign-in's is its request) */
const PLACE = 'account'
const FLASH = 'pds_account_flash'
const FLASH_S = 5 * 60
/** an authenticator app being set up: its key and QR code stay on the page until confirmed */
export const TOTP = 'pds_account_totp'
export const TOTP_SETUP_S = 10 * 60
/** the sections of the page, each action answers in one */
export const SECTIONS = ['apps', 'app-passwords', 'email', 'handle', 'password', 'security', 'data', 'status'] as const
export type Section = (typeof SECTIONS)[number]

export type AccountDeps = Pick<
  Services,
  'config' | 'db' | 'oauth' | 'passwords' | 'mailer' | 'logger' | 'rotationKey' | 'outbound' | 'blobstore' | 'notifySpacesDeleted'
>

/** what a row of the account page answers */
export type Answer =
  /** a page, as is */
  | { kind: 'page'; html: SafeHtml; status?: number; retryAfterS?: number; scripts?: boolean }
  /** back to the account page (a section of it), with what to show once */
  | { kind: 'done'; flash: Flash; at?: string }
  /** to another view of the page, with what to show once */
  | { kind: 'go'; to: string; flash?: Flash }
  /** the page's script asked */
  | { kind: 'json'; status?: number; body: unknown; flash?: Flash }
  /** a file the browser saves: written to the response once the headers are out */
  | { kind: 'download'; filename: string; contentType: string; write(out: Writable): Promise<void> }

export type AccountRowDef = Row<Answer>

export const page = (html: SafeHtml, o: { status?: number; retryAfterS?: number; scripts?: boolean } = {}): Answer => ({
  kind: 'page',
  html,
  ...o,
})
export const done = (flash: Flash, at?: string): Answer => ({ kind: 'done', flash, at })
export const go = (to: string, flash?: Flash): Answer => ({ kind: 'go', to, flash })
export const json = (body: unknown, status = 200, flash?: Flash): Answer => ({ kind: 'json', status, body, flash })

/** per-page helpers bound to the server's configuration */
export function accountKit(deps: AccountDeps) {
  const { config, db } = deps
  const server = serverInfo(config)
  const sealedOpts = (device: Device) => ({ config, device, path: PATH })
  return {
    deps,
    server,
    sealedOpts,
    place: (device: Device): flow.Place => ({ deviceId: device.id, place: PLACE }),
    common: (device: Device, flash: Flash): Common => ({ server, csrf: csrfToken(device), flash }),
    flashTo: (res: Response, device: Device, flash: Flash) => setSealed(res, FLASH, flash, FLASH_S, sealedOpts(device)),
    /** what the last form left to show once; cleared as it is read */
    takeFlash(req: Request, res: Response, device: Device): Flash {
      const flash = readSealed<Flash>(req, FLASH, sealedOpts(device)) ?? {}
      if (readCookie(req, FLASH) !== undefined) clearSealed(res, FLASH, { config, path: PATH })
      return flash
    },
    /** the account this device is signed in to on the page, when its sign-in still counts */
    async current(req: Request, device: Device): Promise<Signed | undefined> {
      const did = readCookie(req, CURRENT)
      return did ? await flow.signedIn(db, device.id, safeDecode(did), REMEMBERED_MAX_S) : undefined
    },
    /** the flow signed `did` in on the device (recorded there): the page shows that account */
    show: (res: Response, did: string) =>
      setCookie(res, CURRENT, encodeURIComponent(did), { publicUrl: config.publicUrl, maxAgeS: REMEMBERED_MAX_S, path: PATH }),
  }
}
export type AccountKit = ReturnType<typeof accountKit>

export function tooMany(waitS: number, what = 'attempts'): string {
  const minutes = Math.ceil(waitS / 60)
  const when = minutes <= 1 ? 'a minute' : minutes < 120 ? `${minutes} minutes` : `${Math.ceil(minutes / 60)} hours`
  return `Too many ${what} for this account or from this network. Try again in ${when}.`
}

/** what a failed password check says, or undefined when the password was right */
export function wrongPassword(out: flow.Outcome): Flash | undefined {
  if (out.kind === 'signedIn') return undefined
  if (out.kind === 'rateLimited') return { error: tooMany(out.retryAfterS) }
  return { error: 'That password is not right.' }
}

/** what the page says about a sign-in code it mailed (or could not) */
export function mailedFlash(mailed: flow.Mailed, sent = 'We emailed you a sign-in code.'): Flash {
  if (mailed === 'sent') return { notice: sent }
  if (mailed === 'none') return {}
  if (mailed === 'tooSoon') return { error: 'A code was sent moments ago. Wait a little before asking for another.' }
  if (mailed === 'down') return { error: 'The email with your code could not be sent. Try "Email me a new code" in a little while.' }
  return { error: tooMany(mailed.retryAfterS, 'codes sent') }
}

/** a cookie's percent-encoded value; a mangled one is no value */
export function safeDecode(v: string): string {
  try {
    return decodeURIComponent(v)
  } catch {
    return ''
  }
}

export function parseJson(text: string | undefined): Record<string, unknown> | undefined {
  if (!text) return undefined
  try {
    const v: unknown = JSON.parse(text)
    return v && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined
  } catch {
    return undefined
  }
}

/** the section named by a form or link, if it is one */
export const sectionOf = (v: unknown): Section | undefined => ((SECTIONS as readonly unknown[]).includes(v) ? (v as Section) : undefined)

/** what an action of the account section gets: the row's context with the signed-in account */
export type ActionContext = RowContext & Signed

/**
 * an action of a signed-in account answering in `section`: a domain rule's refusal (an XRPC
 * error of the shared domain modules) becomes the section's error message
 */
export function action(
  path: string,
  gate: 'signed-in' | 'fresh-password',
  section: Section,
  run: (c: ActionContext) => Promise<Flash | Answer>,
  o: { statuses?: readonly AccountStatus[]; rate?: RateBudget } = {},
): Row<Answer> {
  return {
    method: 'post',
    path: `${PATH}/${path}`,
    gate,
    statuses: o.statuses,
    csrf: true,
    rate: o.rate,
    section,
    run: async (c) => {
      let out: Flash | Answer
      try {
        out = await run({ ...c, ...c.signed! })
      } catch (err) {
        if (err instanceof XRPCError) return done({ error: err.message }, section)
        throw err
      }
      return 'kind' in out ? out : done(out, section)
    },
  }
}
