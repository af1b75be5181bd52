// The one way out: every path that takes an account away from whoever holds it (a password change
// or reset by anyone, the operator revoking credentials, a takedown, a deletion) ends access here,
// inside the transaction of the change, so what ends never depends on which door was used.
//
// Every reason ends: the credential generation (so every access token already out, session or
// OAuth, stops at once), every refresh token (sessions and OAuth grants), unexchanged
// authorization codes, every app password (each was minted under the old password), sign-ins held
// waiting for their second factor with their mailed codes, passkey ceremonies under way, and every
// browser's remembered sign-in. Revoking credentials also removes passkeys, the authenticator app
// and recovery codes: whoever planted one would otherwise sign straight back in, so the owner
// enrols them again after the password reset.
import type { Store } from '../db/schema.js'

export type EndOfAccess =
  /** the main password changed: by the owner, with a reset code, or by the operator */
  | 'password'
  /** com.atproto.temp.revokeAccountCredentials: the operator's response to a compromised account */
  | 'revoke'
  | 'takedown'
  | 'deletion'

/** ends every way into `did` (call inside the transaction of the change that causes it) */
export async function endAccess(trx: Store, did: string, why: EndOfAccess): Promise<void> {
  await trx
    .updateTable('account')
    .set((eb) => ({ credential_gen: eb('credential_gen', '+', 1) }))
    .where('did', '=', did)
    .execute()
  await trx.deleteFrom('refresh_token').where('did', '=', did).execute()
  await trx.deleteFrom('oauth_code').where('did', '=', did).execute()
  // the generation bump already stops their access tokens; the rows go so they cannot sign in again
  await trx.deleteFrom('app_password').where('did', '=', did).execute()
  await trx.deleteFrom('sign_in_step').where('did', '=', did).execute()
  await trx.deleteFrom('sign_in_code').where('did', '=', did).execute()
  await trx.deleteFrom('webauthn_challenge').where('did', '=', did).execute()
  await trx.deleteFrom('device_account').where('did', '=', did).execute()
  // a reset code still out would set yet another password behind the new one
  await trx.deleteFrom('email_token').where('did', '=', did).where('purpose', '=', 'reset-password').execute()
  if (why === 'revoke') {
    await trx.deleteFrom('passkey').where('did', '=', did).execute()
    await trx.deleteFrom('totp').where('did', '=', did).execute()
    await trx.deleteFrom('recovery_code').where('did', '=', did).execute()
  }
}
