// remark's settings for tests/docs/run: check every relative link and
// heading anchor in the files given, offline. `repository: false` because a
// clone may have no `origin` remote (a worktree, CI's checkout); links are
// then checked against the files on disk, not resolved through GitHub.
import validateLinks from 'remark-validate-links';

export default { plugins: [[validateLinks, { repository: false }]] };
