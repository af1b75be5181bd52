// com.atproto.repo.importRepo: a raw CAR body (application/vnd.ipld.car), streamed
// under PDS_BLOB_UPLOAD_LIMIT, imported all-or-nothing.
import type { Server } from '../../../../generated/server/index.js'
import type { Services } from '../../../../context.js'
import type { AuthFor } from '../../../../auth/verifier.js'
import { importRepo } from '../../../../migration/import-repo.js'

export default (api: Server, deps: Pick<Services, 'db' | 'config' | 'logger' | 'testHooks'>) =>
  api.com.atproto.repo.importRepo<AuthFor<'com.atproto.repo.importRepo'>>(async ({ auth, input }) => {
    await importRepo({ ...deps, hooks: deps.testHooks?.importRepo }, auth.credentials.did, input.body)
  })
