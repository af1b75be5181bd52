// What every view of /account shares: the flash a form leaves for the next page, the view models,
// the message lines and the form helper (every form posts to /account/<action> with the device's
// CSRF token).
import { html, type SafeHtml } from '../../html.js'
import type { ServerInfo } from '../../layout.js'
import { CSRF_FIELD } from '../../csrf.js'
import type { ConsentWords } from '#src/oauth/consent-words.js'
import type { AppPasswordView } from '#src/account/app-passwords.js'
import type { Factors, Passkey } from '#src/account/factors/index.js'
import type { SpacesView } from '../spaces.js'

export const SCRIPT_PATH = '/account/passkeys.js'

/** what a page shows once, after the form that made it (carried across the redirect) */
export type Flash = {
  notice?: string
  error?: string
  /** the section to scroll to */
  at?: string
  appPassword?: { name: string; password: string; privileged: boolean }
  recoveryCodes?: string[]
  totp?: { uri: string; secret: string }
  /** a domain the person tried as a handle: the records to publish name it */
  ownDomain?: string
}

export type Common = { server: ServerInfo; csrf: string; flash: Flash }

export type ConnectedAppView = { clientId: string; name: string; host: string; scope: string; words: ConsentWords; lastActiveAt: string }

export type AccountView = {
  did: string
  handle: string
  email: string | null
  emailConfirmed: boolean
  status: string
  /** when the password was last confirmed on this device, if recently enough for sensitive changes */
  unlockedUntil?: Date
  apps: ConnectedAppView[]
  appPasswords: AppPasswordView[]
  factors: Factors
  passkeys: Passkey[]
  handleDomains: string[]
  /** the DID's rotation keys no longer include this server's: its owner signs changes to it */
  didOutOfControl?: boolean
  /** the spaces the person created, and those they belong to or wrote in */
  spaces?: SpacesView
  /** mailed tokens still waiting: a change of address (to which), a confirmation, a deletion */
  pending: { emailChange?: string; confirm: boolean; deletion: boolean }
}

export const csrfField = (c: Common) => html`<input type="hidden" name="${CSRF_FIELD}" value="${c.csrf}" />`

export function messages(f: Flash): SafeHtml {
  return html`${f.error && html`<p class="alert" role="alert" id="error" tabindex="-1">${f.error}</p>`}${
    f.notice && html`<p class="notice" role="status" id="notice" tabindex="-1">${f.notice}</p>`
  }`
}

/** the flash's messages inside the section its form belongs to */
export const sectionMessages = (c: Common, id: string) => (c.flash.at === id ? messages(c.flash) : '')

/** a POST form to /account/<action> with the CSRF field */
export function form(c: Common, action: string, body: SafeHtml, attrs: SafeHtml | string = ''): SafeHtml {
  return html`<form method="post" action="/account/${action}" ${attrs}>${csrfField(c)}${body}</form>`
}

export const when = (iso: string | null | undefined) =>
  iso ? new Date(iso).toISOString().replace('T', ' ').slice(0, 16) + ' UTC' : 'never'
