# read_conf.pl: a Perl program that reads its configuration file for every item (dirty),
# or once before the loop (clean). dejavu has no agent for Perl: the rows are the
# program's own, named by the script, with no line (crates/dejavu/tests/findings.rs,
# a_perl_programs_reread_is_its_own_and_names_no_interpreter_function).
#
# usage: perl read_conf.pl CONF N dirty|clean
use strict;
use warnings;

my ($conf, $n, $mode) = @ARGV;

sub load {
    open(my $fh, '<', $conf) or die "$conf: $!";
    my %c = map { chomp; split /=/, $_, 2 } grep { /=/ } <$fh>;
    close($fh);
    return \%c;
}

my $cfg = $mode eq 'clean' ? load() : undef;
my $total = 0;
for my $i (1 .. $n) {
    my $c = $mode eq 'clean' ? $cfg : load();
    $total += $c->{limit} + $i;
}
print "$total\n";
