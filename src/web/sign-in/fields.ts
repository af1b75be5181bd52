// What both sign-in pages (the OAuth page and /account) show of the one flow's first step, so the
// two never drift apart: the identifier and password fields, and a remembered account's badge.
import { html, type SafeHtml } from '../html.js'

/** the handle-or-email and password fields; the password takes focus once a handle is known */
export function credentialFields(handle: string | undefined): SafeHtml {
  return html`<label for="handle">Handle or email</label>
    <input
      type="text"
      id="handle"
      name="handle"
      value="${handle ?? ''}"
      autocomplete="username"
      autocapitalize="none"
      spellcheck="false"
      required${handle ? '' : html` autofocus`}
    />
    <label for="password">Password <span class="hint">Your account password; app passwords are not accepted here.</span></label>
    <input type="password" id="password" name="password" autocomplete="current-password" required${handle ? html` autofocus` : ''} />`
}

/** up to two letters standing for a remembered account */
export const initials = (handle: string) =>
  handle
    .split('.')
    .filter(Boolean)
    .slice(0, 2)
    .map((p) => p[0].toUpperCase())
    .join('')
