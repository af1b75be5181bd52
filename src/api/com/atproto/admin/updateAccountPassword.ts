// com.atproto.admin.updateAccountPassword: sets the main password and, as a reset does, ends every
// session and OAuth grant of the account.
import type { Server } from '../../../../generated/server/index.js'
import type { Services } from '../../../../context.js'
import type { AuthFor } from '../../../../auth/verifier.js'
import { xrpcError } from '../../../../errors.js'
import { accountByDid } from '../../../../account/admin-views.js'
import { hashPassword, MAX_PASSWORD_LENGTH } from '../../../../account/password.js'
import { setPasswordHash } from '../../../../account/passwords.js'

export default (api: Server, { db }: Pick<Services, 'db'>) =>
  api.com.atproto.admin.updateAccountPassword<AuthFor<'com.atproto.admin.updateAccountPassword'>>(async ({ input }) => {
    const { did, password } = input.body
    if (password.length < 8 || password.length > MAX_PASSWORD_LENGTH) {
      throw xrpcError('InvalidPassword', `Passwords are 8 to ${MAX_PASSWORD_LENGTH} characters`)
    }
    await accountByDid(db, did)
    const hash = await hashPassword(password)
    await setPasswordHash(db, did, hash)
  })
