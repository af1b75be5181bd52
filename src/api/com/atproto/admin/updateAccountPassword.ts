// com.atproto.admin.updateAccountPassword: sets the main password and, as a reset does, ends the
// account's access (every session, OAuth grant and app password); the owner is told.
import type { Server } from '../../../../generated/server/index.js'
import type { Services } from '../../../../context.js'
import type { AuthFor } from '../../../../auth/verifier.js'
import { accountByDid } from '../../../../account/admin-views.js'
import { changePassword, checkPasswordLength } from '../../../../account/passwords.js'

export default (api: Server, deps: Pick<Services, 'db' | 'mailer' | 'config' | 'logger'>) =>
  api.com.atproto.admin.updateAccountPassword<AuthFor<'com.atproto.admin.updateAccountPassword'>>(async ({ input }) => {
    const { did, password } = input.body
    checkPasswordLength(password)
    await accountByDid(deps.db, did)
    await changePassword(deps, did, password, 'operator')
  })
