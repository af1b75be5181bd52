// com.atproto.repo.importRepo: a raw CAR body (application/vnd.ipld.car), streamed
// under PDS_BLOB_UPLOAD_LIMIT, imported all-or-nothing.
import { method } from '#src/api/method.js'
import type { Services } from '#src/context.js'
import { importRepo } from '#src/move/import-repo.js'

export default method(
  'com.atproto.repo.importRepo',
  (deps: Pick<Services, 'db' | 'config' | 'logger' | 'testHooks'>) =>
    async ({ auth, input }) => {
      await importRepo({ ...deps, hooks: deps.testHooks?.importRepo }, auth.credentials.did, input.body)
    },
)
